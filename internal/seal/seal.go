// Package seal protects the MRTR requestState that a server hands to a
// client and receives back on a retry. The client must treat the state as
// opaque and the server must treat what comes back as attacker-controlled,
// so the state is encrypted and authenticated with AES-256-GCM and bound
// to the principal, the method and a digest of the request parameters,
// with an expiry. Any node holding the cluster key can open a token sealed
// by any other node.
//
// A token is "v1." followed by base64url (no padding) of nonce ||
// ciphertext, where the 12-byte nonce is random per seal and the
// plaintext holds the expiry, the binding and the payload. Sealing does
// not make a token single-use: Open returns an id that callers record if
// they must consume a state at most once.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors returned by Open. They are returned wrapped; test with errors.Is.
var (
	// ErrInvalid means the token is malformed, forged, tampered with,
	// sealed with a key this Sealer does not hold, or sealed for another
	// principal (whether expired or not: its presenter learns nothing of
	// it).
	ErrInvalid = errors.New("seal: invalid token")
	// ErrExpired means the token is authentic but its expiry has passed.
	ErrExpired = errors.New("seal: token expired")
	// ErrMismatch means the token is authentic, sealed for this
	// principal, but for a different method or parameters digest.
	ErrMismatch = errors.New("seal: token bound to a different request")
)

const (
	// KeySize is the length in bytes of every key.
	KeySize = 32
	// MaxTokenLen bounds the length of a token. Open rejects longer input
	// before decoding it and Seal refuses payloads that would exceed it.
	MaxTokenLen = 64 << 10

	prefix    = "v1."
	nonceSize = 12
	tagSize   = 16
	// fixedPlain is the smallest plaintext: expiry plus three zero
	// length prefixes.
	fixedPlain = 8 + 3
)

// additionalData separates these tokens from any other use of the key.
var additionalData = []byte("mcpcluster/seal/v1")

// Binding is what a sealed state is bound to. Open fails with ErrMismatch
// unless the caller presents the same binding that was sealed.
type Binding struct {
	// Principal identifies the authenticated caller ("" when there is no
	// authentication).
	Principal string
	// Method is the JSON-RPC method of the originating request.
	Method string
	// ParamsDigest is a digest of the originating request's salient
	// parameters; see Digest and ParamsDigest.
	ParamsDigest []byte
}

// Sealer seals and opens tokens. It is safe for concurrent use.
type Sealer struct {
	aeads []cipher.AEAD // aeads[0] seals; all open
}

// New returns a Sealer for the given keys, each exactly KeySize bytes.
// keys[0] seals new tokens; every key opens tokens, so a cluster rotates
// keys by first adding the new key after the current one on every node,
// then moving it to the front, then dropping the old key once tokens
// sealed with it have expired.
func New(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: no key")
	}
	s := &Sealer{aeads: make([]cipher.AEAD, len(keys))}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("seal: key %d is %d bytes, want %d", i, len(k), KeySize)
		}
		block, err := aes.NewCipher(k) // copies the key
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		s.aeads[i] = aead
	}
	return s, nil
}

// NewRandom returns a Sealer with a fresh random key. Tokens it seals can
// only be opened by the same Sealer, which suits a single node.
func NewRandom() *Sealer {
	key := make([]byte, KeySize)
	rand.Read(key) // never fails; see crypto/rand.Read
	s, err := New(key)
	if err != nil {
		panic(err) // unreachable: the key has the right size
	}
	return s
}

// ParseKey decodes a key given as 64 hexadecimal characters or as base64
// (standard or URL alphabet, padded or not) of exactly KeySize bytes.
// Surrounding white space is ignored. Errors never echo the input, which
// is a secret.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	// The base64 decoders skip CR and LF, which have no place in a key.
	if !strings.ContainsAny(s, "\r\n") {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if k, err := enc.Strict().DecodeString(s); err == nil && len(k) == KeySize {
				return k, nil
			}
		}
	}
	return nil, fmt.Errorf("seal: key must be %d bytes encoded as %d hex characters or base64 (got %d characters)", KeySize, 2*KeySize, len(s))
}

// Seal returns a token that carries payload and opens, until now+ttl,
// only for binding b. ttl must be positive.
func (s *Sealer) Seal(b Binding, payload []byte, ttl time.Duration, now time.Time) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("seal: ttl %v is not positive", ttl)
	}
	plainLen := 8 + fieldLen(len(b.Principal)) + fieldLen(len(b.Method)) + fieldLen(len(b.ParamsDigest)) + len(payload)
	if tokenLen(plainLen) > MaxTokenLen {
		return "", fmt.Errorf("seal: payload of %d bytes makes a token longer than %d bytes", len(payload), MaxTokenLen)
	}
	var nonce [nonceSize]byte
	rand.Read(nonce[:]) // never fails; see crypto/rand.Read
	return s.seal(b, payload, now.Add(ttl), nonce, plainLen), nil
}

// seal builds a token with the given nonce; plainLen is the exact size of
// the plaintext.
func (s *Sealer) seal(b Binding, payload []byte, expiry time.Time, nonce [nonceSize]byte, plainLen int) string {
	buf := make([]byte, nonceSize, nonceSize+plainLen+tagSize)
	copy(buf, nonce[:])

	plain := buf[nonceSize:]
	plain = binary.BigEndian.AppendUint64(plain, uint64(expiry.UnixNano()))
	plain = appendBytes(plain, []byte(b.Principal))
	plain = appendBytes(plain, []byte(b.Method))
	plain = appendBytes(plain, b.ParamsDigest)
	plain = append(plain, payload...)

	sealed := s.aeads[0].Seal(plain[:0], buf[:nonceSize], plain, additionalData)
	return prefix + base64.RawURLEncoding.EncodeToString(buf[:nonceSize+len(sealed)])
}

// Open verifies token and returns its payload and id. The id (hex of the
// token's random nonce) is unique per sealed token; callers that need a
// state to be used at most once record it until the token expires.
// Open returns an error wrapping ErrInvalid, ErrExpired or ErrMismatch.
// A token is valid while now is before its expiry.
func (s *Sealer) Open(token string, b Binding, now time.Time) (payload []byte, id string, err error) {
	if len(token) > MaxTokenLen {
		return nil, "", fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxTokenLen)
	}
	enc, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return nil, "", fmt.Errorf("%w: unknown format", ErrInvalid)
	}
	// The decoder skips CR and LF; a token is canonical, so reject them
	// (and anything else outside the alphabet) first.
	for i := 0; i < len(enc); i++ {
		if !isBase64URL(enc[i]) {
			return nil, "", fmt.Errorf("%w: bad encoding", ErrInvalid)
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return nil, "", fmt.Errorf("%w: bad encoding", ErrInvalid)
	}
	if len(raw) < nonceSize+tagSize+fixedPlain {
		return nil, "", fmt.Errorf("%w: too short", ErrInvalid)
	}
	nonce, ciphertext := raw[:nonceSize], raw[nonceSize:]
	var plain []byte
	for _, aead := range s.aeads {
		if plain, err = aead.Open(nil, nonce, ciphertext, additionalData); err == nil {
			break
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: authentication failed", ErrInvalid)
	}

	expiry := int64(binary.BigEndian.Uint64(plain))
	rest := plain[8:]
	principal, rest, ok1 := cutBytes(rest)
	method, rest, ok2 := cutBytes(rest)
	digest, rest, ok3 := cutBytes(rest)
	if !ok1 || !ok2 || !ok3 {
		// Only reachable with a key that sealed something else.
		return nil, "", fmt.Errorf("%w: malformed contents", ErrInvalid)
	}
	// Another principal's token is, to its presenter, no token at all:
	// judged before the expiry and answered as a forged one, so that it
	// tells nothing of the request it was sealed for.
	if subtle.ConstantTimeCompare(principal, []byte(b.Principal)) != 1 {
		return nil, "", fmt.Errorf("%w: sealed for another principal", ErrInvalid)
	}
	if now.UnixNano() >= expiry {
		return nil, "", fmt.Errorf("%w at %s", ErrExpired, time.Unix(0, expiry).UTC().Format(time.RFC3339Nano))
	}
	if string(method) != b.Method {
		return nil, "", fmt.Errorf("%w: method differs", ErrMismatch)
	}
	if subtle.ConstantTimeCompare(digest, b.ParamsDigest) != 1 {
		return nil, "", fmt.Errorf("%w: parameters differ", ErrMismatch)
	}
	return rest, hex.EncodeToString(nonce), nil
}

func tokenLen(plainLen int) int {
	return len(prefix) + base64.RawURLEncoding.EncodedLen(nonceSize+plainLen+tagSize)
}

// fieldLen is the encoded size of an n-byte field: its length prefix
// plus the bytes.
func fieldLen(n int) int {
	w := 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		w++
	}
	return w + n
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func cutBytes(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	end := w + int(n)
	return b[w:end], b[end:], true
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
