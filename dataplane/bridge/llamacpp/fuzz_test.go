package llamacpp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"
	"time"
)

// goldenStreams are the captured /completion streams, the fuzz seeds.
var goldenStreams = []string{"completion", "completion_utf8_gaps", "completion_emoji", "completion_error"}

// pieceReader reads r in pieces of n bytes (0: whole).
func pieceReader(b []byte, n uint16) io.Reader {
	if n == 0 {
		return bytes.NewReader(b)
	}
	return iotest.HalfReader(&chunked{b: b, n: int(n)})
}

type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// FuzzDecodeStream feeds a /completion stream, real or arbitrary, in
// reads of a fuzzed size. Whatever the bytes: it ends done exactly when it
// reports no error, done only on a last event (stop), hands over no more
// events than the stream has data lines and none with an error or a
// negative count, and gives the same events and end however the stream is
// cut into reads. Seeds: the captured streams, whole and in reads of 1, 7
// and 64 bytes.
func FuzzDecodeStream(f *testing.F) {
	for _, name := range goldenStreams {
		for _, n := range []uint16{0, 1, 7, 64} {
			f.Add(golden(f, name+".sse"), n)
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, piece uint16) {
		whole := runStream(bytes.NewReader(stream))
		if (whole.end == streamDone) != (whole.err == nil) {
			t.Fatalf("end %d with error %v", whole.end, whole.err)
		}
		if whole.end == streamDone && !whole.events[len(whole.events)-1].Stop {
			t.Fatal("done without a last event")
		}
		if len(whole.events) > bytes.Count(stream, []byte("data:")) {
			t.Fatalf("%d events from %d data lines", len(whole.events), bytes.Count(stream, []byte("data:")))
		}
		for _, ev := range whole.events {
			if ev.Error != nil || ev.TokensPredicted < 0 || ev.TokensCached < 0 || ev.TokensEvaluated < 0 {
				t.Fatalf("event handed over: %+v", ev)
			}
		}
		cut := runStream(pieceReader(stream, piece))
		if cut.end != whole.end || !reflect.DeepEqual(cut.events, whole.events) {
			t.Fatalf("in reads of %d: end %d, %d events; whole: end %d, %d events", piece, cut.end, len(cut.events), whole.end, len(whole.events))
		}
	})
}

// FuzzDecodeSlots: whatever the bytes, an accepted /slots lists slots in
// id order with no negative count, and reads back the same encoded.
func FuzzDecodeSlots(f *testing.F) {
	for _, name := range []string{"slots_fresh.json", "slots_idle.json", "slots_busy.json"} {
		f.Add(golden(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		slots, err := DecodeSlots(b)
		if err != nil {
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("error %v is not ErrSchema", err)
			}
			return
		}
		for i, s := range slots {
			if s.ID != i || s.NPromptTokens < 0 || s.NPromptCache < 0 || s.NPromptDone < 0 || s.Decoded() < 0 {
				t.Fatalf("slot %d accepted: %+v", i, s)
			}
		}
		again, err := json.Marshal(slots)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeSlots(again); err != nil || !reflect.DeepEqual(back, slots) && len(slots) > 0 {
			t.Fatalf("read back: %v", err)
		}
	})
}

// FuzzDecodeProps: an accepted /props has a build, 1 to maxSlots slots
// and a positive slot context; a refusal is ErrNotLlamaCpp or ErrSchema.
func FuzzDecodeProps(f *testing.F) {
	f.Add(golden(f, "props.json"))
	f.Add([]byte(`{"detail":"Not Found"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProps(b)
		if err != nil {
			if !errors.Is(err, ErrNotLlamaCpp) && !errors.Is(err, ErrSchema) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if p.BuildInfo == "" || p.TotalSlots < 1 || p.TotalSlots > maxSlots || p.Settings.NCtx < 1 {
			t.Fatalf("accepted %+v", p)
		}
	})
}

// FuzzDecodeModels: an accepted /v1/models names each model once, in
// order, and its owner and vocabulary are the first entry's.
func FuzzDecodeModels(f *testing.F) {
	f.Add(golden(f, "models.json"))
	f.Add([]byte(vllmModels))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeModels(b)
		if err != nil {
			return
		}
		names := m.Names()
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("names %q", names)
		}
		if len(m.Data) > 0 && m.Owner() != m.Data[0].OwnedBy {
			t.Fatalf("owner %q", m.Owner())
		}
	})
}

// FuzzDecodeTokenize: an accepted /tokenize answer reads back the same.
func FuzzDecodeTokenize(f *testing.F) {
	f.Add(golden(f, "tokenize.json"))
	f.Add([]byte(`{"error":{"code":400,"message":"x","type":"y"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := DecodeTokenize(b)
		if err != nil {
			return
		}
		again, _ := json.Marshal(map[string]any{"tokens": ids})
		if back, err := DecodeTokenize(again); err != nil || !slices.Equal(back, ids) {
			t.Fatalf("read back %v %v, want %v", back, err, ids)
		}
	})
}

// FuzzParseMetrics: whatever the exposition, parsing it whole and byte by
// byte gives the same figures, and the LOAD made of them stays within its
// types.
func FuzzParseMetrics(f *testing.F) {
	f.Add(golden(f, "metrics.txt"))
	f.Add(golden(f, "metrics_busy.txt"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMetrics(bytes.NewReader(b))
		m2, err2 := ParseMetrics(iotest.OneByteReader(bytes.NewReader(b)))
		if (err == nil) != (err2 == nil) || err == nil && fmt.Sprint(m) != fmt.Sprint(m2) {
			t.Fatalf("whole %+v %v, byte by byte %+v %v", m, err, m2, err2)
		}
		l := LoadOf(nil, m, 16, 100)
		if l.Tiers[0].Used > l.Tiers[0].Total {
			t.Fatalf("load %+v", l)
		}
	})
}

// FuzzRecover: whatever the text and count, recovered ids are k pieces
// that spell the text, each leaving it incomplete as llama.cpp judges.
func FuzzRecover(f *testing.F) {
	f.Add([]byte(""), []byte("\xe4\xb8"), uint8(2))
	f.Add([]byte("\xe4"), []byte("\xb8"), uint8(1))
	f.Add([]byte(""), []byte("\xf0\x9f\xa5"), uint8(2))
	f.Add([]byte("ab"), []byte("\xf0\x9f\x98"), uint8(3))
	p := builtinPieces(f)
	f.Fuzz(func(t *testing.T, tail, text []byte, k uint8) {
		tail = tail[max(0, len(tail)-3):]
		ids, _, ok := p.Recover(nil, tail, text, int(k))
		if !ok {
			return
		}
		if len(ids) != int(k) || !bytes.Equal(p.Spell(nil, ids, false), text) {
			t.Fatalf("%v for %d ids spelling %q", ids, k, text)
		}
		at := append([]byte(nil), tail...)
		for _, id := range ids {
			at = p.Spell(at, []uint32{id}, false)
			if !utf8Incomplete(at) {
				t.Fatalf("%v: %q complete after id %d", ids, at, id)
			}
		}
	})
}

// FuzzTracker runs arbitrary sequences of what requests and polls can
// say: a router's index built from the events never stores a block twice,
// removes one it does not hold or stores under a parent it does not hold,
// and always equals the tracker's snapshot (trackerRig checks each step).
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 1, 0, 7, 3, 3, 1, 2, 3, 4, 5, 6, 7, 8, 4, 200, 3, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 5, 9, 0, 6, 33, 1, 5, 0, 1, 12, 2, 6, 4, 255, 3, 9, 1, 20, 4, 4, 2, 7, 0, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newRig(t, 2)
		next := func() int {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return int(b)
		}
		// prompts of three families sharing prefixes, 4 to 16 tokens
		prompt := func(x int) []uint32 { return seq(uint32(100*(x%3)), 4+x%13) }
		for len(ops) > 0 {
			switch op := next() % 6; op {
			case 0:
				r.step(r.tr.Hold(uint64(next()%4), prompt(next())))
			case 1:
				id, slot, p := uint64(next()%4), next()%3, prompt(next())
				tokens := append(p, seq(7000, next()%9)...)
				r.step(r.tr.Settle(id, slot, tokens[:len(tokens)-next()%3], len(tokens)))
			case 2:
				r.step(r.tr.End(uint64(next()%4), r.now, prompt(next())...))
			case 3:
				var slots []Slot
				for range 1 + next()%3 {
					task, flags, n := next()%5-1, next(), next()%24
					s := idle(task, n)
					if task < 0 {
						s.Task = nil
					}
					if flags&1 != 0 {
						s = busy(task, n, next()%20, next()%3)
					}
					slots = append(slots, s)
				}
				r.observe(r.tr.Epoch()-uint64(next()%2), slotsOf(slots...)...)
			case 4:
				r.now = r.now.Add(time.Duration(next()) * 10 * time.Millisecond)
			case 5:
				r.step(r.tr.Clear())
			}
		}
	})
}
