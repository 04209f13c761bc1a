package wire

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// The W3C Trace Context example (section 3.2.2.2 of the recommendation).
const exampleTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func exampleTrace() Trace {
	return Trace{TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		ParentID: [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, Flags: TraceSampled}
}

func TestParseTraceparent(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"example", exampleTraceparent, true},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"later version, more fields", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true},
		{"later version, exact", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"version 00 with more", exampleTraceparent + "-01", false},
		{"later version, no dash after flags", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
		{"uppercase hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"short", exampleTraceparent[:54], false},
		{"bad separator", strings.Replace(exampleTraceparent, "-", "_", 1), false},
		{"non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseTraceparent(tc.in)
			if ok != tc.ok {
				t.Fatalf("ParseTraceparent(%q) ok %v, want %v", tc.in, ok, tc.ok)
			}
			if ok && (got.TraceID != exampleTrace().TraceID || got.ParentID != exampleTrace().ParentID) {
				t.Fatalf("ParseTraceparent(%q) = %+v", tc.in, got)
			}
		})
	}
	if tr := exampleTrace(); tr.Traceparent() != exampleTraceparent {
		t.Fatalf("Traceparent() = %q, want %q", tr.Traceparent(), exampleTraceparent)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseTraceparent(exampleTraceparent) }); n != 0 {
		t.Fatalf("ParseTraceparent allocates %v times", n)
	}
}

func traceGenerate() Generate {
	return Generate{RequestID: []byte("r"), Model: []byte("m"), MaxTokens: 4, TopP: 1, DPRank: AnyRank,
		Prompt: TokensOf([]uint32{1, 2}), Flags: GenTrace, Trace: exampleTrace()}
}

// A GENERATE without flag TRACE is the version-1 layout whatever its Trace
// holds; with it, the section follows and decodes back, as a view.
func TestTraceOnlyWhenFlagged(t *testing.T) {
	with := traceGenerate()
	with.Trace.State = []byte("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	base := with
	base.Flags = 0
	bare := base
	bare.Trace = Trace{}
	a, _ := base.AppendPayload(nil)
	b, _ := bare.AppendPayload(nil)
	if !bytes.Equal(a, b) {
		t.Fatal("trace fields changed a GENERATE without flag TRACE")
	}
	c, err := with.AppendPayload(nil)
	if err != nil || len(c) != with.PayloadSize() || len(c) != len(a)+with.Trace.size() {
		t.Fatalf("flagged GENERATE: %d bytes, PayloadSize %d, err %v", len(c), with.PayloadSize(), err)
	}
	var g Generate
	if err := g.Decode(c[:len(a)], nil); !errors.Is(err, ErrTruncated) {
		t.Fatalf("flagged GENERATE cut to the v1 layout: %v", err)
	}
	if err := g.Decode(c, nil); err != nil || g.Trace.Traceparent() != exampleTraceparent || string(g.Trace.State) != string(with.Trace.State) {
		t.Fatalf("decoding: %v %+v", err, g.Trace)
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.Decode(c, nil) }); n != 0 {
		t.Fatalf("decoding a GENERATE with a trace allocates %v times", n)
	}
	// A later GENERATE without the flag leaves no trace behind.
	if err := g.Decode(a, nil); err != nil || g.Trace.Valid() {
		t.Fatalf("decoding without the flag: %v %+v", err, g.Trace)
	}
}

func TestTraceRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Generate, []byte) []byte
	}{
		{"zero trace id", func(g *Generate, p []byte) []byte { g.Trace.TraceID = [16]byte{}; return nil }},
		{"zero parent id", func(g *Generate, p []byte) []byte { g.Trace.ParentID = [8]byte{}; return nil }},
		{"tracestate too long", func(g *Generate, p []byte) []byte {
			g.Trace.State = bytes.Repeat([]byte("a"), MaxTraceState+1)
			return nil
		}},
		{"tracestate control byte", func(g *Generate, p []byte) []byte { g.Trace.State = []byte("a=b\r\nx: y"); return nil }},
		{"reserved byte", func(g *Generate, p []byte) []byte { p[len(p)-3] = 1; return p }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := traceGenerate()
			p, _ := g.AppendPayload(nil)
			if edited := tc.edit(&g, p); edited == nil {
				p, _ = g.AppendPayload(nil)
			}
			var got Generate
			if err := got.Decode(p, nil); !errors.Is(err, ErrBadValue) {
				t.Fatalf("decoding: %v, want ErrBadValue", err)
			}
		})
	}
}

// A bridge's HTTP request carries the GENERATE's trace as W3C headers, and
// nothing when the GENERATE had none.
func TestSetTraceHeaders(t *testing.T) {
	g := traceGenerate()
	g.Trace.State = []byte("rojo=00f067aa0ba902b7")
	ctx := WithTrace(context.Background(), &g)
	g.Trace.State[0] = 'X' // the frame's payload is reused: the context kept a copy
	h := http.Header{}
	SetTraceHeaders(ctx, h)
	if h.Get("traceparent") != exampleTraceparent || h.Get("tracestate") != "rojo=00f067aa0ba902b7" {
		t.Fatalf("headers %v", h)
	}
	g.Flags = 0
	h = http.Header{}
	SetTraceHeaders(WithTrace(context.Background(), &g), h)
	if len(h) != 0 {
		t.Fatalf("a GENERATE without trace set headers %v", h)
	}
}

func traceGoldenCases() []goldenCase {
	tr := exampleTrace()
	tr.State = []byte("congo=t61rcWkgMzE")
	return []goldenCase{{name: "generate_trace", about: "GENERATE with the trace section (flag TRACE, sent because the engine's WELCOME had FeatureTrace): traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 and a tracestate",
		stream: 5, msg: &Generate{RequestID: []byte("r5"), Model: []byte("m"), MaxTokens: 16, TopP: 1, DPRank: AnyRank,
			Flags: GenTrace, Prompt: TokensOf([]uint32{1, 2, 3}), Trace: tr}}}
}

func FuzzTraceparent(f *testing.F) {
	f.Add(exampleTraceparent)
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Fuzz(func(t *testing.T, s string) {
		tr, ok := ParseTraceparent(s)
		if !ok {
			return
		}
		back, ok := ParseTraceparent(tr.Traceparent())
		if !ok || back.TraceID != tr.TraceID || back.ParentID != tr.ParentID || back.Flags != tr.Flags {
			t.Fatalf("%q parsed to %+v, which formats to %q and parses to %+v", s, tr, tr.Traceparent(), back)
		}
	})
}
