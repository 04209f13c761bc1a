package tokenize

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
)

// BenchmarkChatTurn20 renders and tokenizes turn 20 of a conversation
// whose turns 1 to 19 were served before, in order, its messages compact
// as the gateway passes them: incrementally with the segment cache (the
// product), in
// full without caches, the render alone both ways, and end to end in the
// router (render, tokenize, then route.Router.Route: hash the blocks,
// match them against 8 engines, one holding turn 19's blocks, score, pick
// and reserve; the reservation is released each iteration).
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
			r.route(b, dst)
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
			r.route(b, dst)
		}
		cpu.report(b)
		r.check(b)
		b.ReportMetric(float64(len(dst)), "tokens")
	})
}

// turnRouter is the router's side of a turn: a route.Router under the kv
// policy over 8 simulated engines (zero cost, loopback), of which the
// fourth holds the blocks of the previous turn's ids. Routing hashes the
// prompt, matches it against all 8, scores and picks, and reserves the
// pick's load, which each iteration releases.
type turnRouter struct {
	router *route.Router
	req    route.Request
	holder *engine.Engine
	held   int // blocks the holder holds
	got    *engine.Engine
	depth  int // the last decision's
}

func newTurnRouter(b *testing.B, prevIDs []uint32) *turnRouter {
	cfgs := make([]sim.Config, 8)
	addrs := make([]string, len(cfgs))
	for i := range cfgs {
		cfgs[i] = sim.DefaultConfig()
		cfgs[i].ID = fmt.Sprintf("sim-%d", i)
		cfgs[i].Rank.Profile, cfgs[i].LoadInterval = sim.ZeroProfile, 0
		_, addrs[i] = simtest.Serve(b, cfgs[i])
	}
	pool := simtest.Pool(b, engine.DefaultConfig(), kvstore.New(kvstore.Options{}), addrs...)
	r := &turnRouter{router: route.New(pool, route.PolicyKV, route.DefaultWeights()), holder: pool.Engines()[3]}
	r.req.Model = cfgs[0].Rank.Model
	held, err := r.holder.Hasher().Hash(nil, prevIDs, nil)
	if err != nil {
		b.Fatal(err)
	}
	slot, ok := r.holder.Slot()
	if !ok {
		b.Fatalf("%s has no slot", r.holder.Addr)
	}
	if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Hashes: held}}); err != nil {
		b.Fatal(err)
	}
	r.held = len(held)
	return r
}

// route routes a request of ids and releases its reservation.
func (r *turnRouter) route(b *testing.B, ids []uint32) {
	r.req.Tokens = ids
	d, err := r.router.Route(&r.req)
	if err != nil {
		b.Fatal(err)
	}
	r.got, r.depth = d.Engine, d.Match.Depth()
	d.Done()
}

// check fails b unless the last turn went to the fourth engine on every
// block it holds (the previous turn's: the ids of the turn start with them).
func (r *turnRouter) check(b *testing.B) {
	if r.got != r.holder || r.depth != r.held {
		b.Fatalf("routed to %s on %d blocks; want %s on %d", r.got.Addr, r.depth, r.holder.Addr, r.held)
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
