package wire

import (
	"encoding/hex"
	"fmt"
)

// FeatureTrace, in a WELCOME, says the engine reads GENERATE's trace
// section (flag GenTrace): the W3C trace context (traceparent and
// tracestate) of the router's span that the request's engine work belongs
// to. A router sends the section only to an engine that announced the bit,
// so engines from before it never see a flag they refuse; an engine that
// does not announce it simply gets no trace context (PROTOCOL.md 6.1).
const FeatureTrace Feature = 1 << 17

// TraceSampled is the sampled bit of Trace.Flags (W3C trace-flags): the
// caller may be recording the trace.
const TraceSampled uint8 = 1 << 0

// MaxTraceState bounds a trace section's tracestate in bytes: W3C Trace
// Context (section 3.3.1.5) has vendors propagate at least 512 characters
// and lets a longer list be dropped, which a router does.
const MaxTraceState = 512

// traceparentLen is the length of a version-00 traceparent.
const traceparentLen = 55

// Trace is GENERATE's trace section, present when flag GenTrace is set: the
// fields of a version-00 W3C traceparent, and the tracestate verbatim.
// ParentID is the router's span that the engine's spans become children
// of. Decoding does not allocate: State is a view into the payload.
//
//	| trace_id [16] | parent_id [8] | trace_flags u8 | reserved u8 |
//	| tracestate str16 (<= MaxTraceState bytes, printable ASCII) |
type Trace struct {
	TraceID  [16]byte
	ParentID [8]byte
	Flags    uint8  // W3C trace-flags: TraceSampled; other bits are forwarded as sent
	State    []byte // W3C tracestate header value; empty: none
}

const traceFixed = 16 + 8 + 1 + 1

// Valid reports whether t names a trace: W3C forbids all-zero ids.
func (t *Trace) Valid() bool { return t.TraceID != [16]byte{} && t.ParentID != [8]byte{} }

func (t *Trace) size() int { return traceFixed + 2 + len(t.State) }

func (t *Trace) append(e *encoder) {
	e.b = append(e.b, t.TraceID[:]...)
	e.b = append(e.b, t.ParentID[:]...)
	e.u8(t.Flags)
	e.zero(1)
	e.str16(t.State, "tracestate")
}

func (t *Trace) decode(c *cursor) {
	if b := c.take(traceFixed, "trace"); b != nil {
		copy(t.TraceID[:], b)
		copy(t.ParentID[:], b[16:])
		t.Flags = b[24]
		if b[25] != 0 {
			c.fail(ErrBadValue, "trace reserved (must be zero)")
		}
	}
	t.State = c.str16("tracestate")
}

func (t *Trace) validate() error {
	if !t.Valid() {
		return fmt.Errorf("trace: an all-zero trace_id or parent_id: %w", ErrBadValue)
	}
	if len(t.State) > MaxTraceState {
		return fmt.Errorf("tracestate of %d bytes over %d: %w", len(t.State), MaxTraceState, ErrBadValue)
	}
	for _, b := range t.State {
		if b < 0x20 || b > 0x7e {
			return fmt.Errorf("tracestate byte %#x (printable ASCII only): %w", b, ErrBadValue)
		}
	}
	return nil
}

// AppendTraceparent appends t as a traceparent header value,
// "00-<trace_id>-<parent_id>-<trace_flags>" in lowercase hex.
func (t *Trace) AppendTraceparent(dst []byte) []byte {
	dst = append(dst, "00-"...)
	dst = hex.AppendEncode(dst, t.TraceID[:])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, t.ParentID[:])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, []byte{t.Flags})
}

// Traceparent returns t as a traceparent header value.
func (t *Trace) Traceparent() string {
	var b [traceparentLen]byte
	return string(t.AppendTraceparent(b[:0]))
}

// ParseTraceparent reads a traceparent header value as W3C Trace Context
// (section 3.2) has a receiver read it: lowercase hex fields, version ff
// refused, a version-00 value exactly 55 characters, a later version's
// first four fields taken and the rest ignored. ok is false for a value
// it refuses, which the receiver then treats as absent. State is left
// empty. It does not allocate.
func ParseTraceparent(v string) (t Trace, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Trace{}, false
	}
	var version [1]byte
	if !hexField(version[:], v[0:2]) || version[0] == 0xff ||
		version[0] == 0 && len(v) != traceparentLen || len(v) > traceparentLen && v[traceparentLen] != '-' {
		return Trace{}, false
	}
	var flags [1]byte
	if !hexField(t.TraceID[:], v[3:35]) || !hexField(t.ParentID[:], v[36:52]) || !hexField(flags[:], v[53:55]) {
		return Trace{}, false
	}
	t.Flags = flags[0]
	return t, t.Valid()
}

// hexField decodes lowercase hex s into dst (len(s) == 2*len(dst)).
func hexField(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := lowerHex(s[2*i])
		lo, ok2 := lowerHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
