package api

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The scalar readers store a raw value (valid JSON, as jsonWalker
// checked) as encoding/json stores it into a field of that type; false
// says the value is not one they take plainly.

func isNull(v []byte) bool { return string(v) == "null" }

// fastString reads a string field: null leaves it as it was.
func fastString(v []byte, dst *string) bool {
	if isNull(v) {
		return true
	}
	if v[0] != '"' {
		return false
	}
	if in := v[1 : len(v)-1]; !hasByte(in, '\\') && utf8.Valid(in) {
		*dst = string(in)
		return true
	}
	s, ok := unquote(v) // escapes or bad UTF-8: encoding/json's own unquoting
	if ok {
		*dst = s
	}
	return ok
}

// unquote is encoding/json's reading of the string v (out of line: its
// variable goes to the heap, where encoding/json takes it, only here).
func unquote(v []byte) (string, bool) {
	var s string
	err := json.Unmarshal(v, &s)
	return s, err == nil
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// fastBool reads a boolean field: null leaves it as it was.
func fastBool(v []byte, dst *bool) bool {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
}

// fastBoolPtr reads a *bool field: null is nil.
func fastBoolPtr(v []byte, dst **bool) bool {
	if isNull(v) {
		*dst = nil
		return true
	}
	var b bool
	if !fastBool(v, &b) {
		return false
	}
	*dst = &b
	return true
}

// fastInt parses an integer of up to 18 digits, no fraction or exponent.
func fastInt(v []byte) (int64, bool) {
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// fastInt64Ptr reads a *int64 field: null is nil.
func fastInt64Ptr(v []byte, dst **int64) bool {
	if isNull(v) {
		*dst = nil
		return true
	}
	n, ok := fastInt(v)
	if !ok {
		return false
	}
	*dst = &n
	return true
}

// fastUint64Ptr reads a *uint64 field: null is nil.
func fastUint64Ptr(v []byte, dst **uint64) bool {
	if isNull(v) {
		*dst = nil
		return true
	}
	n, ok := fastInt(v)
	if !ok || n < 0 || v[0] == '-' {
		return false
	}
	u := uint64(n)
	*dst = &u
	return true
}

// fastFloat64Ptr reads a *float64 field: null is nil.
func fastFloat64Ptr(v []byte, dst **float64) bool {
	if isNull(v) {
		*dst = nil
		return true
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	var f float64
	if n, ok := fastInt(v); ok && n > -1<<53 && n < 1<<53 && (n != 0 || v[0] != '-') { // -0 is ParseFloat's
		f = float64(n)
	} else {
		var err error
		if f, err = strconv.ParseFloat(string(v), 64); err != nil {
			return false
		}
	}
	*dst = &f
	return true
}

// fastUint32s reads a []uint32 field: null is nil, [] an empty list.
func fastUint32s(v []byte, dst *[]uint32) bool {
	if isNull(v) {
		*dst = nil
		return true
	}
	if v[0] != '[' {
		return false
	}
	out := make([]uint32, 0, 8)
	w := jsonWalker{b: v, i: 1}
	for {
		w.space()
		if w.b[w.i] == ']' && len(out) == 0 {
			break
		}
		start := w.i
		if !w.number() {
			return false
		}
		n, ok := fastInt(w.b[start:w.i])
		if !ok || n < 0 || n > 1<<32-1 || w.b[start] == '-' {
			return false
		}
		out = append(out, uint32(n))
		w.space()
		if c := w.b[w.i]; c == ']' {
			break
		} else if c != ',' {
			return false
		}
		w.i++
	}
	*dst = out
	return true
}

// fastRaw reads a json.RawMessage field: the value's bytes, null too.
func fastRaw(v []byte, dst *json.RawMessage) bool {
	*dst = v
	return true
}

// fastJSON reads any other field (a map, a nested struct, a list of
// strings) with encoding/json, into what dst holds as encoding/json
// would (a map given twice is merged), through a copy of its own so that
// dst's struct need not go to the heap.
func fastJSON[T any](v []byte, dst *T) bool {
	tmp := new(T)
	*tmp = *dst
	if json.Unmarshal(v, tmp) != nil {
		return false
	}
	*dst = *tmp
	return true
}
