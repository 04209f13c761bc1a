package tokenize

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// BenchmarkChatTurn20 renders and tokenizes turn 20 of a conversation
// whose turns 1 to 19 were served before, in order, its messages compact
// as the gateway passes them: incrementally with the segment cache (the
// product), in
// full without caches, the render alone both ways, and end to end as far
// as the router's index (render, tokenize, hash the blocks, match them
// against 8 engines, one holding turn 19's blocks).
//
// Each reports cpu-ns/op besides ns/op: the process's CPU time (user and
// system, all threads, the collector's too) over the loop, which a busy
// shared machine inflates far less than wall time.
func BenchmarkChatTurn20(b *testing.B) {
	tok := builtin(b)
	var cases []map[string]json.RawMessage
	readJSON(b, "testdata/chat_cases.json", &cases)
	in := chatInputOf(b, cases[len(cases)-1])
	var msgs []json.RawMessage
	if err := json.Unmarshal(in.Messages, &msgs); err != nil {
		b.Fatal(err)
	}
	in.Messages, _ = json.Marshal(msgs)
	var prevIDs []uint32                // turn 19's
	for n := 1; n <= len(msgs)-2; n++ { // turns 1 to 19 were served, in order
		var m struct{ Role string }
		if err := json.Unmarshal(msgs[n-1], &m); err != nil || m.Role != "user" {
			continue
		}
		prev := *in
		prev.Messages, _ = json.Marshal(msgs[:n])
		var err error
		if prevIDs, _, err = tok.EncodeChat(nil, &prev); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("segment-cache", func(b *testing.B) {
		b.ReportAllocs()
		var dst []uint32
		cpu := startCPU()
		for b.Loop() {
			dst, _, _ = tok.EncodeChat(dst[:0], in)
		}
		cpu.report(b)
		b.ReportMetric(float64(len(dst)), "tokens")
	})
	b.Run("no-cache", func(b *testing.B) {
		b.ReportAllocs()
		var dst []uint32
		cpu := startCPU()
		for b.Loop() {
			text, err := tok.Chat().renderFull(in)
			if err != nil {
				b.Fatal(err)
			}
			dst = tok.encodeUncached(text)
		}
		cpu.report(b)
		b.ReportMetric(float64(len(dst)), "tokens")
	})
	b.Run("render-only", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, err := tok.Chat().renderFull(in); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("render-incremental", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, err := tok.Chat().Render(in); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("end-to-end", func(b *testing.B) {
		r := newTurnRouter(b, prevIDs)
		var dst []uint32
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			dst, _, _ = tok.EncodeChat(dst[:0], in)
			r.match(dst)
		}
		cpu.report(b)
		r.check(b)
		b.ReportMetric(float64(len(dst)), "tokens")
	})
	// Turn 20 as a client sends it: the assistant's reply and the new
	// user message are text the tokenizer has not seen (each iteration
	// tags them with its number), after turn 19 served as before.
	b.Run("end-to-end-fresh", func(b *testing.B) {
		r := newTurnRouter(b, prevIDs)
		inputs := make([]*ChatInput, b.N)
		for i := range inputs {
			fresh := *in
			tagged := append([]json.RawMessage(nil), msgs...)
			for k := len(msgs) - 2; k < len(msgs); k++ {
				var m plainMessage
				if err := json.Unmarshal(msgs[k], &m); err != nil {
					b.Fatal(err)
				}
				m.Content = fmt.Sprintf("(%d) %s", i, m.Content)
				tagged[k], _ = json.Marshal(m)
			}
			fresh.Messages, _ = json.Marshal(tagged)
			inputs[i] = &fresh
		}
		var dst []uint32
		b.ReportAllocs()
		b.ResetTimer()
		cpu := startCPU()
		for i := range b.N {
			dst, _, _ = tok.EncodeChat(dst[:0], inputs[i])
			r.match(dst)
		}
		cpu.report(b)
		r.check(b)
		b.ReportMetric(float64(len(dst)), "tokens")
	})
}

// turnRouter is the router's side of a turn as far as its index: block
// hashes, and a match against 8 engines of which the fourth holds the
// blocks of the previous turn's ids.
type turnRouter struct {
	hasher *kvstore.Hasher
	ix     *kvstore.Index
	cands  []kvstore.Slot
	out    []kvstore.Match
	hashes []uint64
	held   int
}

func newTurnRouter(b *testing.B, prevIDs []uint32) *turnRouter {
	hasher, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 16, Seed: 1, Model: "Qwen/Qwen3-8B"})
	if err != nil {
		b.Fatal(err)
	}
	r := &turnRouter{hasher: hasher, ix: kvstore.New(kvstore.DefaultOptions())}
	for i := range 8 {
		slots, err := r.ix.AddEngine(kvstore.EngineConfig{ID: string(rune('a' + i)), Ranks: 1, Capacity: [kvstore.NumTiers]uint64{1 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		r.cands = append(r.cands, slots...)
	}
	held, _ := hasher.Hash(nil, prevIDs, nil)
	if err := r.ix.Apply(r.cands[3], []kvstore.Event{{Kind: kvstore.Stored, Hashes: held}}); err != nil {
		b.Fatal(err)
	}
	r.held, r.out = len(held), make([]kvstore.Match, len(r.cands))
	return r
}

// match hashes ids and matches them against the engines.
func (r *turnRouter) match(ids []uint32) {
	r.hashes, _ = r.hasher.Hash(r.hashes[:0], ids, nil)
	r.ix.Match(r.hashes, r.cands, r.out)
}

// check fails b unless the fourth engine matched every block it holds
// (the previous turn's: the ids of the turn start with them).
func (r *turnRouter) check(b *testing.B) {
	if int(r.out[3].Blocks[0]) != r.held {
		b.Fatalf("engine 3 matched %d blocks of %d", r.out[3].Blocks[0], r.held)
	}
}

// cpuClock is the process's CPU time at the start of a benchmark loop.
type cpuClock time.Duration

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock(processCPU()) }

// report adds cpu-ns/op, the CPU time since the start over b.N.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-time.Duration(c))/float64(b.N), "cpu-ns/op")
}
