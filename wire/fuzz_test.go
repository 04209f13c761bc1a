package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// seedFrames adds every golden frame, whole and split at every byte boundary
// (the split point travels as the fuzz input's second argument).
func seedFrames(f *testing.F) {
	for _, c := range goldenCases() {
		frame := encodeGolden(f, c)
		for split := 1; split <= len(frame); split++ {
			f.Add(frame, uint16(split))
		}
	}
}

// FuzzReader feeds arbitrary bytes, delivered in pieces of a fuzzed size,
// through the frame reader and then through the decoder of each frame's type.
// Nothing may panic; every error must wrap a package sentinel or be an EOF.
func FuzzReader(f *testing.F) {
	seedFrames(f)
	lim := DefaultLimits()
	lim.MaxFrameSize = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		r := NewReader(&chunkReader{data: data, sizes: []int{int(chunk%4096) + 1}}, &lim)
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				if !isSentinel(err) && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			m := NewMessage(fr.Type)
			if err := m.Decode(fr.Payload, &lim); err != nil && !isSentinel(err) {
				t.Fatalf("decoding %s: error without sentinel: %v", fr.Type, err)
			}
		}
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrFrameTooLarge, ErrTruncated, ErrTrailingBytes, ErrUnknownType,
		ErrBadHeader, ErrBadValue, ErrLimit, ErrDecompress, ErrVersion, ErrAuth, ErrUnexpectedFrame} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// fuzzMessage checks one message decoder: no panic, sentinel errors only, and
// whatever decodes re-encodes to the same bytes and the same value.
func fuzzMessage(f *testing.F, t Type) {
	for _, c := range goldenCases() {
		if c.msg.Type() == t {
			p, err := c.msg.AppendPayload(nil)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(p)
		}
	}
	lim := DefaultLimits()
	f.Fuzz(func(tt *testing.T, payload []byte) {
		m := NewMessage(t)
		if err := m.Decode(payload, &lim); err != nil {
			if !isSentinel(err) {
				tt.Fatalf("error without sentinel: %v", err)
			}
			return
		}
		again, err := m.AppendPayload(nil)
		if err != nil {
			tt.Fatalf("re-encoding a decoded %s: %v", t, err)
		}
		if !bytes.Equal(again, payload) {
			tt.Fatalf("%s does not round-trip:\n in  %x\n out %x", t, payload, again)
		}
	})
}

func FuzzHello(f *testing.F)           { fuzzMessage(f, TypeHello) }
func FuzzWelcome(f *testing.F)         { fuzzMessage(f, TypeWelcome) }
func FuzzAuth(f *testing.F)            { fuzzMessage(f, TypeAuth) }
func FuzzPing(f *testing.F)            { fuzzMessage(f, TypePing) }
func FuzzRing(f *testing.F)            { fuzzMessage(f, TypeRing) }
func FuzzGoaway(f *testing.F)          { fuzzMessage(f, TypeGoaway) }
func FuzzError(f *testing.F)           { fuzzMessage(f, TypeError) }
func FuzzGenerate(f *testing.F)        { fuzzMessage(f, TypeGenerate) }
func FuzzTokens(f *testing.F)          { fuzzMessage(f, TypeTokens) }
func FuzzCancel(f *testing.F)          { fuzzMessage(f, TypeCancel) }
func FuzzKVEvents(f *testing.F)        { fuzzMessage(f, TypeKVEvents) }
func FuzzLoad(f *testing.F)            { fuzzMessage(f, TypeLoad) }
func FuzzSnapshotRequest(f *testing.F) { fuzzMessage(f, TypeSnapshotRequest) }
func FuzzSnapshot(f *testing.F)        { fuzzMessage(f, TypeSnapshot) }
func FuzzPong(f *testing.F)            { fuzzMessage(f, TypePong) }
func FuzzLoadRequest(f *testing.F)     { fuzzMessage(f, TypeLoadRequest) }
