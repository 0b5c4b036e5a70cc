package jsonschema

import (
	"encoding/json"
	"testing"
)

func mustNumber(t *testing.T, v any) number {
	t.Helper()
	n, ok := numberOf(v)
	if !ok {
		t.Fatalf("numberOf(%#v): not a number", v)
	}
	return n
}

func TestCmpNumber(t *testing.T) {
	tests := []struct {
		a, b any
		want int
	}{
		{json.Number("1"), json.Number("1.0"), 0},
		{json.Number("1"), 1.0, 0},
		{json.Number("0.1"), 0.1, 0},
		{json.Number("-0"), json.Number("0"), 0},
		{json.Number("1e2"), json.Number("100"), 0},
		{json.Number("9007199254740993"), json.Number("9007199254740992"), 1},
		{json.Number("9007199254740992"), json.Number("9007199254740993"), -1},
		{json.Number("0.30000000000000001"), json.Number("0.3"), 1},
		{json.Number("1e400"), json.Number("1e401"), -1},
		{json.Number("-1e400"), json.Number("1e-400"), -1},
		{json.Number("1e-400"), json.Number("0"), 1},
		{json.Number("12345678901234567890"), uint64(12345678901234567890), 0},
		{int64(-9007199254740993), json.Number("-9007199254740992"), -1},
		{2.5, 2, 1},
		{int8(-3), uint(3), -1},
	}
	for _, tt := range tests {
		got := cmpNumber(mustNumber(t, tt.a), mustNumber(t, tt.b))
		if got != tt.want {
			t.Errorf("cmpNumber(%v, %v): got %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestIsInteger(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{json.Number("1"), true},
		{json.Number("1.0"), true},
		{json.Number("1.5e1"), true},
		{json.Number("1e400"), true},
		{json.Number("1.05e1"), false},
		{json.Number("1e-400"), false},
		{json.Number("9007199254740993.5"), false},
		{json.Number("-0.0"), true},
		{1.0, true},
		{1.5, false},
		{int64(1 << 60), true},
	}
	for _, tt := range tests {
		if got := mustNumber(t, tt.v).isInteger(); got != tt.want {
			t.Errorf("isInteger(%v): got %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestIsMultipleOf(t *testing.T) {
	tests := []struct {
		x, m any
		want bool
	}{
		{json.Number("10"), json.Number("5"), true},
		{json.Number("11"), json.Number("5"), false},
		{json.Number("0.07"), json.Number("0.01"), true},
		{0.07, json.Number("0.01"), true},
		{json.Number("0.075"), json.Number("0.01"), false},
		{json.Number("1e300"), json.Number("7"), false},
		{json.Number("1e300"), json.Number("8"), true},
		{json.Number("1e999999999"), json.Number("0.001"), true},
		{json.Number("1e-999999999"), json.Number("3"), false},
		{json.Number("0"), json.Number("0.3"), true},
		{json.Number("-4.5"), json.Number("1.5"), true},
		{json.Number("19.99"), json.Number("0.01"), true},
		{json.Number("9007199254740993"), json.Number("3"), true},
		{json.Number("9007199254740993"), json.Number("2"), false},
	}
	for _, tt := range tests {
		if got := isMultipleOf(mustNumber(t, tt.x), mustNumber(t, tt.m)); got != tt.want {
			t.Errorf("isMultipleOf(%v, %v): got %v, want %v", tt.x, tt.m, got, tt.want)
		}
	}
}

func TestParseNumberRejectsNonJSON(t *testing.T) {
	for _, s := range []string{"", "-", "+1", "01", "1.", ".5", "1e", "0x10", "Inf", "NaN", "1_000", "1e+"} {
		if _, ok := parseNumber(s); ok {
			t.Errorf("parseNumber(%q): got ok, want rejection", s)
		}
	}
	for _, s := range []string{"0", "-0", "1.5", "1e5", "1E-5", "-12.5e+3"} {
		if _, ok := parseNumber(s); !ok {
			t.Errorf("parseNumber(%q): got rejection, want ok", s)
		}
	}
}
