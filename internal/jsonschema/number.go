package jsonschema

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// number is a JSON number. f is the nearest float64. text, when not empty,
// is the exact decimal the number was written as; it is empty when f is
// known to be exact (a float64 instance, or a small integer literal).
//
// Comparisons use f first: correctly rounded parsing is monotonic, so
// different floats order their decimals the same way. Only equal floats
// with a decimal behind them need the exact (and slower) comparison.
type number struct {
	f    float64
	text string
}

// maxExactInt is the largest integer below which every integer is exactly
// representable as a float64 (2^53).
const maxExactInt = 1 << 53

// numberOf returns the number held by a decoded JSON value, or false if the
// value is not a number. Non-finite floats are not JSON numbers.
func numberOf(v any) (number, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return number{}, false
		}
		return number{f: x}, true
	case json.Number:
		return parseNumber(string(x))
	case float32:
		return numberOf(float64(x))
	case int:
		return intNumber(int64(x)), true
	case int8:
		return intNumber(int64(x)), true
	case int16:
		return intNumber(int64(x)), true
	case int32:
		return intNumber(int64(x)), true
	case int64:
		return intNumber(x), true
	case uint:
		return uintNumber(uint64(x)), true
	case uint8:
		return uintNumber(uint64(x)), true
	case uint16:
		return uintNumber(uint64(x)), true
	case uint32:
		return uintNumber(uint64(x)), true
	case uint64:
		return uintNumber(x), true
	}
	return number{}, false
}

func intNumber(i int64) number {
	n := number{f: float64(i)}
	if i >= maxExactInt || i <= -maxExactInt {
		n.text = strconv.FormatInt(i, 10)
	}
	return n
}

func uintNumber(u uint64) number {
	n := number{f: float64(u)}
	if u >= maxExactInt {
		n.text = strconv.FormatUint(u, 10)
	}
	return n
}

// parseNumber parses a JSON number literal. It rejects anything the JSON
// grammar does not allow (hex, "Inf", leading '+', underscores).
func parseNumber(s string) (number, bool) {
	if !validNumber(s) {
		return number{}, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return number{}, false
	}
	n := number{f: f, text: s}
	// A plain integer literal of at most 15 digits is exact as a float64.
	if len(s) <= 15 && !strings.ContainsAny(s, ".eE") {
		n.text = ""
	}
	return n, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// validNumber reports whether s matches the JSON number grammar.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// String formats the number for messages, as written when known.
func (n number) String() string {
	if n.text != "" {
		return n.text
	}
	if math.Abs(n.f) < 1e21 {
		return strconv.FormatFloat(n.f, 'f', -1, 64)
	}
	return strconv.FormatFloat(n.f, 'g', -1, 64)
}

// decimal is an exact decimal value: sign × 0.digits × 10^exp, with no
// leading or trailing zeros in digits. Zero has empty digits and is never
// negative.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// maxExp saturates decimal exponents so that absurd literals such as
// 1e999999999999999999 cannot overflow; ordering among such literals is
// not meaningful anyway.
const maxExp = 1 << 40

func (n number) decimal() decimal {
	s := n.text
	if s == "" {
		s = strconv.FormatFloat(n.f, 'e', -1, 64)
	}
	return parseDecimal(s)
}

// parseDecimal converts a valid JSON number literal (or strconv's 'e'
// format) to a decimal.
func parseDecimal(s string) decimal {
	var d decimal
	if s != "" && s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := intPart + frac
	point := len(intPart)
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return decimal{}
	}
	e := 0
	if expPart != "" {
		eneg := false
		switch expPart[0] {
		case '-':
			eneg = true
			expPart = expPart[1:]
		case '+':
			expPart = expPart[1:]
		}
		for i := 0; i < len(expPart); i++ {
			if e < maxExp {
				e = e*10 + int(expPart[i]-'0')
			}
		}
		e = min(e, maxExp)
		if eneg {
			e = -e
		}
	}
	d.digits = digits
	d.exp = point + e
	return d
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmpDecimal returns -1, 0 or +1 as a is less than, equal to or greater
// than b.
func cmpDecimal(a, b decimal) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	c := 0
	switch {
	case a.exp != b.exp:
		c = 1
		if a.exp < b.exp {
			c = -1
		}
	default:
		c = strings.Compare(a.digits, b.digits)
	}
	return c * sa
}

// cmpNumber compares two numbers exactly.
func cmpNumber(a, b number) int {
	switch {
	case a.f < b.f:
		return -1
	case a.f > b.f:
		return 1
	case a.text == "" && b.text == "":
		return 0
	}
	return cmpDecimal(a.decimal(), b.decimal())
}

// isInteger reports whether n has no fractional part (1.0 and 1e2 are
// integers).
func (n number) isInteger() bool {
	if n.text == "" {
		return n.f == math.Trunc(n.f)
	}
	d := n.decimal()
	return d.digits == "" || len(d.digits) <= d.exp
}

// isMultipleOf reports whether x is an integer multiple of m (m > 0),
// exactly, without ever building numbers whose size depends on the
// exponents.
func isMultipleOf(x, m number) bool {
	if x.text == "" && m.text == "" && math.Abs(x.f) < maxExactInt && m.f < maxExactInt &&
		x.f == math.Trunc(x.f) && m.f == math.Trunc(m.f) {
		return math.Mod(x.f, m.f) == 0
	}
	dx, dm := x.decimal(), m.decimal()
	if dx.digits == "" {
		return true
	}
	if dm.digits == "" {
		return false
	}
	// x = X × 10^ax and m = M × 10^am with X and M integers.
	// x/m = X × 10^(ax-am) / M.
	ax := dx.exp - len(dx.digits)
	am := dm.exp - len(dm.digits)
	k := ax - am
	var bx, bm big.Int
	bx.SetString(dx.digits, 10)
	bm.SetString(dm.digits, 10)
	if k >= 0 {
		// M divides X × 10^k iff it divides X × 10^min(k, K), where K is
		// large enough to cover every factor 2 and 5 of M.
		k = min(k, 4*len(dm.digits)+4)
		bx.Mul(&bx, pow10(k))
	} else {
		// X is below 10^len(X); M × 10^-k larger than that cannot divide it.
		if -k > len(dx.digits) {
			return false
		}
		bm.Mul(&bm, pow10(-k))
	}
	var r big.Int
	r.Rem(&bx, &bm)
	return r.Sign() == 0
}

func pow10(k int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
}

// canonicalNumber is a string key equal for numerically equal numbers.
func canonicalNumber(n number) string {
	d := n.decimal()
	if d.digits == "" {
		return "0"
	}
	sign := ""
	if d.neg {
		sign = "-"
	}
	return sign + d.digits + "e" + strconv.Itoa(d.exp)
}
