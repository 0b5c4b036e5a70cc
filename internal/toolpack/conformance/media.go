package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"
)

// pngBase64 is a 2×2 red PNG image, base64-encoded; audioBase64 is a
// 0.05 s 8 kHz mono 8-bit WAV tone, base64-encoded. Both are built at
// start-up so the payloads are real, decodable files.
var (
	pngBase64   = base64.StdEncoding.EncodeToString(makePNG())
	audioBase64 = base64.StdEncoding.EncodeToString(makeWAV())
)

// makePNG encodes a tiny solid red image.
func makePNG() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	red := color.NRGBA{R: 0xff, A: 0xff}
	for y := range 2 {
		for x := range 2 {
			img.SetNRGBA(x, y, red)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("conformance: encoding the test image: " + err.Error())
	}
	return buf.Bytes()
}

// makeWAV builds a RIFF/WAVE file: PCM, mono, 8 kHz, 8 bits per sample,
// holding 400 samples of a 440 Hz sine.
func makeWAV() []byte {
	const (
		rate     = 8000
		bits     = 8
		channels = 1
		samples  = 400
	)
	data := make([]byte, samples)
	for i := range data {
		// 8-bit PCM is unsigned with silence at 128.
		v := 128 + 64*math.Sin(2*math.Pi*440*float64(i)/rate)
		data[i] = byte(math.Round(v))
	}
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + len(data))) // size of everything after this field
	b.WriteString("WAVE")
	b.WriteString("fmt ")
	le(uint32(16))                         // fmt chunk size
	le(uint16(1))                          // PCM
	le(uint16(channels))                   // channels
	le(uint32(rate))                       // sample rate
	le(uint32(rate * channels * bits / 8)) // byte rate
	le(uint16(channels * bits / 8))        // block align
	le(uint16(bits))                       // bits per sample
	b.WriteString("data")
	le(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}
