package coordinator

import (
	"errors"
	"slices"
	"testing"
)

// BusKinds returns the kinds of busKinds, sorted.
func BusKinds() []string {
	var kinds []string
	for k := range busKinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// unlisted is a message of a kind busKinds has no entry for.
type unlisted struct{}

func (unlisted) wireForm() wire { return wire{T: "unlisted"} }

// A message type without an entry in busKinds cannot be sent: receivers
// would skip it.
func TestEncodeRefusesAKindWithoutEntry(t *testing.T) {
	if b, err := Encode(unlisted{}); err == nil {
		t.Fatalf("Encode(unlisted{}) = %s, want an error", b)
	}
	if _, err := Encode(nil); err == nil {
		t.Fatal("Encode(nil): no error")
	}
}

// Every entry of busKinds is indexed by the kind its type writes, and
// hands its handler what it decodes: a wire form of the kind alone is
// either malformed (a field the kind needs is missing) or a message of
// that kind.
func TestBusKindsAreConsistent(t *testing.T) {
	for name, k := range busKinds {
		if k.name != name || k.decode == nil || k.handle == nil {
			t.Errorf("entry %q: name %q, decode %v, handle %v", name, k.name, k.decode != nil, k.handle != nil)
			continue
		}
		m, err := k.decode(wire{T: name})
		switch {
		case errors.Is(err, ErrMalformed):
		case err != nil:
			t.Errorf("kind %q alone: untyped error %v", name, err)
		case m.wireForm().T != name:
			t.Errorf("kind %q decodes to %T of kind %q", name, m, m.wireForm().T)
		}
	}
}
