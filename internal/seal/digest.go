package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// RetryOnlyParams are the top-level parameter keys that a client adds or
// changes when it retries a request after an input_required result. They
// are excluded from the parameters digest so that the retry matches the
// original request.
var RetryOnlyParams = []string{"inputResponses", "requestState", "_meta"}

// Digest returns the SHA-256 digest that binds a sealed state to a
// request: it covers method and params, which should be the output of
// CanonicalParams. The method is length-prefixed so that no two distinct
// (method, params) pairs hash the same input.
func Digest(method string, params []byte) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(method)))])
	io.WriteString(h, method)
	h.Write(params)
	return h.Sum(nil)
}

// ParamsDigest is Digest of method and the canonical form of raw without
// RetryOnlyParams: the digest of the original request and of its retries
// are equal.
func ParamsDigest(method string, raw json.RawMessage) ([]byte, error) {
	params, err := CanonicalParams(raw, RetryOnlyParams...)
	if err != nil {
		return nil, err
	}
	return Digest(method, params), nil
}

// CanonicalParams decodes raw as a JSON object, removes the top-level keys
// in drop, and re-encodes it deterministically: object keys sorted at
// every level, no insignificant white space, numbers kept as written,
// strings re-escaped in one fixed way. Absent or null params are treated
// as the empty object. Anything else that is not an object is an error.
func CanonicalParams(raw json.RawMessage, drop ...string) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("seal: params: %w", err)
	}
	if obj == nil {
		return nil, errors.New("seal: params: not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("seal: params: trailing data after object")
	}
	for _, k := range drop {
		delete(obj, k)
	}
	// encoding/json writes map keys in sorted order and json.Number
	// verbatim, which makes the output deterministic.
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("seal: params: %w", err)
	}
	return out, nil
}
