package sse

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strconv"
)

// EventID is an SSE event id that is unique across the deployment and
// names the stream it belongs to, so that a resuming client's
// Last-Event-ID identifies both the stream to replay and the position in
// it. Its text form is Stream + "_" + decimal Seq, for example
// "k3x9q2m7abcdwxyz_42".
type EventID struct {
	// Stream identifies the stream: 1 to MaxStreamLen characters from
	// [A-Za-z0-9-]. NewStreamID generates suitable values.
	Stream string
	// Seq is the position of the event within the stream.
	Seq uint64
}

// Limits on the text form of an EventID.
const (
	MaxStreamLen  = 64
	MaxEventIDLen = 96
)

// String returns the text form of id. It does not check id; ParseEventID
// accepts the result only when Stream is valid.
func (id EventID) String() string {
	return string(id.Append(make([]byte, 0, len(id.Stream)+21)))
}

// Append appends the text form of id to dst.
func (id EventID) Append(dst []byte) []byte {
	dst = append(dst, id.Stream...)
	dst = append(dst, '_')
	return strconv.AppendUint(dst, id.Seq, 10)
}

var (
	errEventIDLength = errors.New("sse: event id: too long")
	errEventIDStream = errors.New("sse: event id: stream must be 1-64 characters of [A-Za-z0-9-] followed by '_'")
	errEventIDSeq    = errors.New("sse: event id: sequence must be a decimal uint64 without sign or leading zeros")
)

// ParseEventID parses the text form of an EventID. It is strict, because
// its input is the client-supplied Last-Event-ID header: the stream is 1
// to 64 characters of [A-Za-z0-9-], then "_", then a decimal uint64 with
// no sign and no leading zeros (except "0" itself), and the whole id is
// at most 96 bytes. For every s it accepts, ParseEventID(s).String() == s.
func ParseEventID(s string) (EventID, error) {
	if len(s) > MaxEventIDLen {
		return EventID{}, errEventIDLength
	}
	i := 0
	for i < len(s) && isStreamChar(s[i]) {
		i++
	}
	if i == 0 || i > MaxStreamLen || i == len(s) || s[i] != '_' {
		return EventID{}, errEventIDStream
	}
	digits := s[i+1:]
	if digits == "" || (digits[0] == '0' && len(digits) > 1) {
		return EventID{}, errEventIDSeq
	}
	var seq uint64
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return EventID{}, errEventIDSeq
		}
		d := uint64(c - '0')
		if seq > (^uint64(0)-d)/10 {
			return EventID{}, errEventIDSeq
		}
		seq = seq*10 + d
	}
	return EventID{Stream: s[:i], Seq: seq}, nil
}

// ValidStreamID reports whether s is acceptable as EventID.Stream.
func ValidStreamID(s string) bool {
	if len(s) == 0 || len(s) > MaxStreamLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isStreamChar(s[i]) {
			return false
		}
	}
	return true
}

func isStreamChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

var streamEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewStreamID returns a fresh, unguessable stream id: 16 lower-case
// base32 characters (80 bits) from crypto/rand.
func NewStreamID() string {
	var b [10]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return streamEncoding.EncodeToString(b[:])
}
