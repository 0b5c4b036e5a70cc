package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	t0      = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	binding = Binding{Principal: "user:alice", Method: "tools/call", ParamsDigest: Digest("tools/call", []byte(`{"name":"x"}`))}
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustNew(t testing.TB, keys ...[]byte) *Sealer {
	t.Helper()
	s, err := New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSeal(t testing.TB, s *Sealer, b Binding, payload []byte) string {
	t.Helper()
	tok, err := s.Seal(b, payload, time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	s := mustNew(t, key(1))
	for _, payload := range [][]byte{nil, {}, []byte("state"), bytes.Repeat([]byte{0xff}, 10000)} {
		tok := mustSeal(t, s, binding, payload)
		if !strings.HasPrefix(tok, "v1.") {
			t.Fatalf("token %q lacks the v1. prefix", tok)
		}
		got, id, err := s.Open(tok, binding, t0.Add(59*time.Second))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, payload) {
			t.Errorf("payload = %q, want %q", got, payload)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(tok[3:])
		if want := hex.EncodeToString(raw[:12]); id != want {
			t.Errorf("id = %q, want %q", id, want)
		}
	}
}

func TestEmptyBinding(t *testing.T) {
	s := NewRandom()
	tok := mustSeal(t, s, Binding{}, []byte("p"))
	if _, _, err := s.Open(tok, Binding{}, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(tok, Binding{ParamsDigest: []byte{}}, t0); err != nil {
		t.Fatalf("nil and empty digest should be equal: %v", err)
	}
}

func TestFixedSealOpens(t *testing.T) {
	s := mustNew(t, key(1))
	tok := fixedSeal(s, binding, "p", 1)
	if p, _, err := s.Open(tok, binding, t0); err != nil || string(p) != "p" {
		t.Fatalf("Open(fixedSeal) = %q, %v", p, err)
	}
}

func TestSealsDiffer(t *testing.T) {
	s := mustNew(t, key(1))
	a := mustSeal(t, s, binding, []byte("same"))
	b := mustSeal(t, s, binding, []byte("same"))
	if a == b {
		t.Fatal("two seals of the same input are equal")
	}
	_, idA, _ := s.Open(a, binding, t0)
	_, idB, _ := s.Open(b, binding, t0)
	if idA == idB {
		t.Fatalf("two seals share id %q", idA)
	}
}

func TestTamper(t *testing.T) {
	s := mustNew(t, key(1))
	tok := mustSeal(t, s, binding, []byte("payload"))
	raw, err := base64.RawURLEncoding.DecodeString(tok[3:])
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			m := bytes.Clone(raw)
			m[i] ^= bit
			forged := "v1." + base64.RawURLEncoding.EncodeToString(m)
			if _, _, err := s.Open(forged, binding, t0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("flipping bit %#x of byte %d: got %v, want ErrInvalid", bit, i, err)
			}
		}
	}
	// Every character of the text form, including the prefix.
	for i := range tok {
		for _, c := range []byte{'A', '_', '.', '='} {
			if tok[i] == c {
				continue
			}
			forged := tok[:i] + string(c) + tok[i+1:]
			if _, _, err := s.Open(forged, binding, t0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("replacing character %d with %q: got %v, want ErrInvalid", i, c, err)
			}
		}
	}
}

func TestInvalid(t *testing.T) {
	s := mustNew(t, key(1))
	tok := mustSeal(t, s, binding, []byte("p"))
	raw, _ := base64.RawURLEncoding.DecodeString(tok[3:])
	tests := map[string]string{
		"empty":           "",
		"prefix only":     "v1.",
		"no prefix":       tok[3:],
		"other version":   "v2." + tok[3:],
		"truncated":       tok[:len(tok)-1],
		"truncated raw":   "v1." + base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]),
		"short":           "v1." + base64.RawURLEncoding.EncodeToString(raw[:20]),
		"extended":        tok + "AA",
		"padded":          tok + "==",
		"embedded LF":     tok[:10] + "\n" + tok[10:],
		"embedded CR":     tok[:10] + "\r" + tok[10:],
		"embedded space":  tok[:10] + " " + tok[10:],
		"trailing space":  tok + " ",
		"too long":        "v1." + strings.Repeat("A", MaxTokenLen),
		"garbage":         "v1.!!!!",
		"other key":       mustSeal(t, mustNew(t, key(2)), binding, []byte("p")),
		"zero ciphertext": "v1." + base64.RawURLEncoding.EncodeToString(make([]byte, 64)),
	}
	for name, tok := range tests {
		t.Run(name, func(t *testing.T) {
			if p, _, err := s.Open(tok, binding, t0); !errors.Is(err, ErrInvalid) {
				t.Errorf("got %q, %v, want ErrInvalid", p, err)
			}
		})
	}
}

func TestMismatch(t *testing.T) {
	s := mustNew(t, key(1))
	tok := mustSeal(t, s, binding, []byte("p"))
	other := func(f func(*Binding)) Binding {
		b := binding
		b.ParamsDigest = bytes.Clone(b.ParamsDigest)
		f(&b)
		return b
	}
	tests := map[string]Binding{
		"method":          other(func(b *Binding) { b.Method = "prompts/get" }),
		"params":          other(func(b *Binding) { b.ParamsDigest = Digest("tools/call", []byte(`{"name":"y"}`)) }),
		"digest flipped":  other(func(b *Binding) { b.ParamsDigest[0] ^= 1 }),
		"digest short":    other(func(b *Binding) { b.ParamsDigest = b.ParamsDigest[:31] }),
		"no digest":       other(func(b *Binding) { b.ParamsDigest = nil }),
		"method in param": other(func(b *Binding) { b.ParamsDigest = Digest("tools/cal", []byte(`l{"name":"x"}`)) }),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if p, _, err := s.Open(tok, b, t0); !errors.Is(err, ErrMismatch) {
				t.Errorf("got %q, %v, want ErrMismatch", p, err)
			}
		})
	}
}

// A token presented by another principal (or by none, or with no
// principal sealed in it) is invalid, as a forged one, expired or not:
// it gives its presenter nothing to learn of the request.
func TestAnotherPrincipal(t *testing.T) {
	s := mustNew(t, key(1))
	for name, tc := range map[string]struct{ sealed, presented string }{
		"another":          {"user:alice", "user:mallory"},
		"none presented":   {"user:alice", ""},
		"none sealed":      {"", "user:mallory"},
		"prefix of sealed": {"user:alice", "user:alic"},
		"sealed is prefix": {"user:alic", "user:alice"},
	} {
		t.Run(name, func(t *testing.T) {
			sb, pb := binding, binding
			sb.Principal, pb.Principal = tc.sealed, tc.presented
			tok, err := s.Seal(sb, []byte("p"), 30*time.Second, t0)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range []time.Time{t0, t0.Add(time.Hour)} {
				p, id, err := s.Open(tok, pb, at)
				if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrExpired) || errors.Is(err, ErrMismatch) || p != nil || id != "" {
					t.Errorf("at %v: got %q, %q, %v; want ErrInvalid alone", at.Sub(t0), p, id, err)
				}
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	s := mustNew(t, key(1))
	tok, err := s.Seal(binding, []byte("p"), 30*time.Second, t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at   time.Time
		want error
	}{
		{t0.Add(-time.Hour), nil}, // clock skew between nodes: still valid
		{t0, nil},
		{t0.Add(30*time.Second - 1), nil},
		{t0.Add(30 * time.Second), ErrExpired},
		{t0.Add(time.Hour), ErrExpired},
	}
	for _, tt := range tests {
		_, _, err := s.Open(tok, binding, tt.at)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Open at %v: got %v, want %v", tt.at.Sub(t0), err, tt.want)
		}
	}
	if _, err := s.Seal(binding, nil, 0, t0); err == nil {
		t.Error("Seal with zero ttl succeeded")
	}
	if _, err := s.Seal(binding, nil, -time.Second, t0); err == nil {
		t.Error("Seal with negative ttl succeeded")
	}
}

func TestKeyRotation(t *testing.T) {
	old := mustNew(t, key(1))
	both := mustNew(t, key(2), key(1))
	newOnly := mustNew(t, key(2))

	oldTok := mustSeal(t, old, binding, []byte("old"))
	newTok := mustSeal(t, both, binding, []byte("new"))

	if p, _, err := both.Open(oldTok, binding, t0); err != nil || string(p) != "old" {
		t.Errorf("rotated sealer opening old token: %q, %v", p, err)
	}
	if p, _, err := newOnly.Open(newTok, binding, t0); err != nil || string(p) != "new" {
		t.Errorf("new-key sealer opening token from rotated sealer: %q, %v", p, err)
	}
	if _, _, err := old.Open(newTok, binding, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("old sealer opening new token: got %v, want ErrInvalid", err)
	}
	if _, _, err := newOnly.Open(oldTok, binding, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("retired key still opens: got %v, want ErrInvalid", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(); err == nil {
		t.Error("New() succeeded without keys")
	}
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Errorf("New with a %d-byte key succeeded", n)
		}
	}
	if _, err := New(key(1), make([]byte, 16)); err == nil {
		t.Error("New with a bad second key succeeded")
	}
	// The Sealer must not alias the caller's key.
	k := key(1)
	s := mustNew(t, k)
	tok := mustSeal(t, s, binding, nil)
	k[0] ^= 0xff
	if _, _, err := s.Open(tok, binding, t0); err != nil {
		t.Errorf("mutating the key slice changed the Sealer: %v", err)
	}
}

func TestNewRandom(t *testing.T) {
	a, b := NewRandom(), NewRandom()
	tok := mustSeal(t, a, binding, []byte("p"))
	if _, _, err := a.Open(tok, binding, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Open(tok, binding, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("another random Sealer opened the token: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = byte(i*7 + 0xf9) // includes bytes whose base64 uses + / - _
	}
	good := map[string]string{
		"hex lower":      hex.EncodeToString(k),
		"hex upper":      strings.ToUpper(hex.EncodeToString(k)),
		"std padded":     base64.StdEncoding.EncodeToString(k),
		"std raw":        base64.RawStdEncoding.EncodeToString(k),
		"url padded":     base64.URLEncoding.EncodeToString(k),
		"url raw":        base64.RawURLEncoding.EncodeToString(k),
		"trailing space": hex.EncodeToString(k) + "\n",
	}
	for name, s := range good {
		got, err := ParseKey(s)
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("%s: ParseKey(%q) = %x, %v, want %x", name, s, got, err, k)
		}
	}
	secret := "s3cr3t-value-that-must-not-be-logged"
	bad := map[string]string{
		"empty":         "",
		"short hex":     hex.EncodeToString(k[:31]),
		"long hex":      hex.EncodeToString(append(k, 0)),
		"hex non-hex":   "zz" + hex.EncodeToString(k)[2:],
		"short base64":  base64.StdEncoding.EncodeToString(k[:31]),
		"long base64":   base64.StdEncoding.EncodeToString(append(k, 0)),
		"inner newline": base64.StdEncoding.EncodeToString(k)[:20] + "\n" + base64.StdEncoding.EncodeToString(k)[20:],
		"secret":        secret,
	}
	for name, s := range bad {
		_, err := ParseKey(s)
		if err == nil {
			t.Errorf("%s: ParseKey(%q) succeeded", name, s)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q echoes the key", name, err)
		}
	}
}

func TestSealTooLarge(t *testing.T) {
	s := mustNew(t, key(1))
	if _, err := s.Seal(binding, make([]byte, MaxTokenLen), time.Minute, t0); err == nil {
		t.Fatal("Seal of an oversized payload succeeded")
	}
	// The largest payload that Seal accepts opens.
	lo, hi := 0, MaxTokenLen
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, err := s.Seal(binding, make([]byte, mid), time.Minute, t0); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	tok, err := s.Seal(binding, make([]byte, lo), time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) > MaxTokenLen || len(tok) < MaxTokenLen-3 {
		t.Errorf("largest token is %d bytes, want just under %d", len(tok), MaxTokenLen)
	}
	if _, _, err := s.Open(tok, binding, t0); err != nil {
		t.Errorf("Open of the largest token: %v", err)
	}
}

// fixedSeal seals deterministically: fuzzing runs the setup of FuzzOpen
// in every worker process, so its seed tokens must not depend on random
// nonces.
func fixedSeal(s *Sealer, b Binding, payload string, n byte) string {
	plainLen := 8 + fieldLen(len(b.Principal)) + fieldLen(len(b.Method)) + fieldLen(len(b.ParamsDigest)) + len(payload)
	var nonce [nonceSize]byte
	nonce[0] = n
	return s.seal(b, []byte(payload), t0.Add(time.Minute), nonce, plainLen)
}

func FuzzOpen(f *testing.F) {
	s := mustNew(f, key(1), key(2))
	genuine := map[string]bool{}
	for i, p := range []string{"", "x", "payload-payload-payload"} {
		tok := fixedSeal(s, binding, p, byte(i))
		genuine[tok] = true
		f.Add(tok)
	}
	old := fixedSeal(mustNew(f, key(2)), binding, "old", 10)
	genuine[old] = true
	f.Add(old)
	f.Add("v1.")
	f.Add("v1.AAAA")
	f.Add(fixedSeal(mustNew(f, key(3)), binding, "foreign", 20))
	other := binding
	other.Principal = "user:mallory"
	f.Add(fixedSeal(s, other, "mismatch", 30))
	f.Fuzz(func(t *testing.T, tok string) {
		p, id, err := s.Open(tok, binding, t0)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrExpired) && !errors.Is(err, ErrMismatch) {
				t.Fatalf("error %v is none of the sentinels", err)
			}
			if p != nil || id != "" {
				t.Fatalf("failed Open returned payload %q, id %q", p, id)
			}
			return
		}
		if !genuine[tok] {
			t.Fatalf("Open accepted a token that was never sealed: %q (payload %q)", tok, p)
		}
	})
}
