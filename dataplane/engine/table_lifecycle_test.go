package engine

import (
	"errors"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestGoaway: GOAWAY makes the engine draining: no new streams, open ones
// finish; when the engine then closes, the router goes down and
// reconnects to ready.
func TestGoaway(t *testing.T) {
	cases := []struct {
		name string
		m    *wire.Goaway
	}{
		{"shutdown with a drain time", &wire.Goaway{Code: wire.CodeShutdown, DrainMillis: 30000, Message: "bye"}},
		{"no drain time", &wire.Goaway{Code: wire.CodeShutdown}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng, _, e, c := ttConnected(t)
			s, _ := ttOpen(t, e, c)

			c.send(t, 0, tc.m)
			ttWaitFor(t, "draining", func() bool { return e.State() == StateDraining })
			if e.Ready() || e.State().String() != "draining" {
				t.Errorf("after GOAWAY: Ready() %v, State() %v", e.Ready(), e.State())
			}
			if _, err := e.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
				t.Errorf("Generate while draining: %v, want ErrNotReady", err)
			}
			c.send(t, s.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 4))
			if evs := ttCollect(t, s); !slices.Equal(ttTokens(evs), []uint32{4}) || evs[len(evs)-1].Err != nil {
				t.Errorf("the open stream did not finish while draining: %+v", evs)
			}

			c.Close() // drained: the engine closes
			ttWaitFor(t, "down", func() bool { return e.State() == StateDown })
			c2 := eng.accept(t)
			ttReady(t, e)
			ttOpen(t, e, c2)
		})
	}
}

// TestLoadReports: each engine keeps its own last LOAD, numbered from 1,
// with when it arrived.
func TestLoadReports(t *testing.T) {
	engA := ttStartEngine(t, ttHandshake("a"), nil)
	engB := ttStartEngine(t, ttHandshake("b"), nil)
	p, _ := ttPool(t, nil, engA.addr, engB.addr)
	a, b := p.Engines()[0], p.Engines()[1]
	ca, cb := engA.accept(t), engB.accept(t)
	ttReady(t, a)
	ttReady(t, b)

	type report struct {
		from *ttConn
		m    wire.Load
	}
	steps := []struct {
		name   string
		send   report
		engine *Engine
		seq    uint64
	}{
		{"first report", report{ca, wire.Load{Running: 3, Waiting: 1, QueuedPrefillTokens: 100, ActiveDecodeTokens: 50,
			TimestampNano: 1, Tiers: []wire.TierUsage{{Tier: wire.TierGPU, Used: 10, Total: 100}}}}, a, 1},
		{"second replaces the first", report{ca, wire.Load{Running: 7, TimestampNano: 2,
			Tiers: []wire.TierUsage{{Tier: wire.TierGPU, Used: 20, Total: 100}, {Tier: wire.TierCPU, Used: 5, Total: 400}}}}, a, 2},
		{"another engine's report is its own", report{cb, wire.Load{Waiting: 9, TimestampNano: 3}}, b, 1},
	}
	last := map[*Engine]wire.Load{}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := time.Now()
			st.send.from.send(t, 0, &st.send.m)
			ttWaitFor(t, "the LOAD", func() bool { _, seq, _ := st.engine.LoadReport(); return seq == st.seq })
			l, _, at := st.engine.LoadReport()
			if !reflect.DeepEqual(*l, st.send.m) || !reflect.DeepEqual(*st.engine.Load(), st.send.m) {
				t.Errorf("LoadReport() = %+v, want %+v", *l, st.send.m)
			}
			if at.Before(before) || at.After(time.Now()) {
				t.Errorf("arrived at %v, sent at %v", at, before)
			}
			last[st.engine] = st.send.m
			for _, e := range []*Engine{a, b} {
				if want, ok := last[e]; !ok && e.Load() != nil {
					t.Errorf("%s has a report it never sent: %+v", e.Addr, *e.Load())
				} else if ok && !reflect.DeepEqual(*e.Load(), want) {
					t.Errorf("%s: Load() = %+v, want %+v", e.Addr, *e.Load(), want)
				}
			}
		})
	}
}

// TestReconnect: when an engine restarts the router fails its streams,
// forgets its blocks, goes down, reconnects, asks for a snapshot again and
// takes the new handshake (ranks re-registered when their number changed).
func TestReconnect(t *testing.T) {
	first := ttHandshake("e")
	first.Features = wire.FeatureSnapshot
	grown := first
	grown.ID, grown.Models, grown.DPRanks, grown.BlockSize = "e-2", []string{"m", "m2"}, 2, 32
	cases := []struct {
		name  string
		again wire.Handshake
	}{
		{"same announcement", first},
		{"new id, models, ranks and block size", grown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := ttStartEngine(t, first, nil)
			p, _ := ttPool(t, nil, eng.addr)
			e := p.Engines()[0]
			c := eng.accept(t)
			c.expect(t, &wire.SnapshotRequest{})
			ttReady(t, e)
			slot, _ := e.Slot()
			c.send(t, 0, ttBatch(1, 0, ttStored(wire.TierGPU, ttChainA...)))
			ttBarrier(t, c, e)
			if got := ttHeld(p.Index(), slot, ttChainA); got.Depth() != 3 {
				t.Fatalf("before the restart the engine holds %+v", got)
			}
			s, _ := ttOpen(t, e, c)

			eng.stop()
			if evs := ttCollect(t, s); !errors.Is(evs[len(evs)-1].Err, ErrEngineDown) {
				t.Errorf("stream across the restart: %+v", evs)
			}
			ttWaitFor(t, "down", func() bool { return e.State() == StateDown })
			ttWaitFor(t, "the lost engine's blocks forgotten", func() bool { return ttHeld(p.Index(), slot, ttChainA).Depth() == 0 })

			eng.setHandshake(tc.again)
			eng.restart(t)
			c = eng.accept(t)
			var req wire.SnapshotRequest
			if c.expect(t, &req); req.SnapshotID != 1 {
				t.Errorf("SNAPSHOT_REQUEST %d after the reconnect, want 1", req.SnapshotID)
			}
			ttReady(t, e)
			if got := e.Info(); got.ID != tc.again.ID || !slices.Equal(got.Models, tc.again.Models) ||
				got.BlockSize != tc.again.BlockSize || got.DPRanks != tc.again.DPRanks {
				t.Errorf("Info() after the reconnect = %+v, want %+v", got, tc.again)
			}
			if e.Hasher().BlockSize() != int(tc.again.BlockSize) {
				t.Errorf("Hasher block size %d, want %d", e.Hasher().BlockSize(), tc.again.BlockSize)
			}
			for _, m := range tc.again.Models {
				if !e.Serves(m) {
					t.Errorf("does not serve %q after the reconnect", m)
				}
			}
			slots, ok := p.Index().Slots(e.Addr)
			if !ok || len(slots) != max(int(tc.again.DPRanks), 1) {
				t.Fatalf("index slots after the reconnect: %v, want %d", slots, max(int(tc.again.DPRanks), 1))
			}
			if s0, _ := e.Slot(); s0 != slots[0] {
				t.Errorf("Slot() = %d, index says %d", s0, slots[0])
			}
			// The new process numbers its batches from 1 again.
			c.send(t, 0, ttBatch(1, 0, ttStored(wire.TierGPU, ttChainB...)))
			ttBarrier(t, c, e)
			if got := ttRequests(t, e, c); len(got) != 0 {
				t.Errorf("SNAPSHOT_REQUESTs %v for the new process's first batch", got)
			}
			if got := ttHeld(p.Index(), slots[0], ttChainB); got.Depth() != 3 {
				t.Errorf("after the reconnect the engine holds %+v of its new blocks", got)
			}
			s2, _ := ttOpen(t, e, c)
			c.send(t, s2.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 8))
			if evs := ttCollect(t, s2); evs[len(evs)-1].Err != nil {
				t.Errorf("stream after the reconnect: %+v", evs)
			}
			if got := s.Take(); got != nil {
				t.Errorf("the old stream got %+v after the reconnect", got)
			}
		})
	}
}

// TestPing: the router answers an engine's PING, and PINGs the engine
// itself every PingInterval.
func TestPing(t *testing.T) {
	t.Run("engine's PING answered", func(t *testing.T) {
		eng := ttStartEngine(t, ttHandshake("e"), nil)
		p, _ := ttPool(t, nil, eng.addr)
		c := eng.accept(t)
		ttReady(t, p.Engines()[0])
		for _, data := range []uint64{42, 0, 1 << 63} {
			c.send(t, 0, &wire.Ping{Data: data})
			var pong wire.Pong
			if f := c.expect(t, &pong); pong.Data != data || f.Stream != 0 {
				t.Errorf("PONG %d on stream %d, want %d on 0", pong.Data, f.Stream, data)
			}
		}
	})
	t.Run("router PINGs, answered engine stays", func(t *testing.T) {
		eng := ttStartEngine(t, ttHandshake("e"), nil)
		p, _ := ttPool(t, func(c *Config) { c.PingInterval = 20 * time.Millisecond }, eng.addr)
		e := p.Engines()[0]
		c := eng.accept(t)
		ttReady(t, e)
		var prev uint64
		for range 5 {
			var ping wire.Ping
			c.expect(t, &ping)
			if ping.Data <= prev {
				t.Errorf("PING data %d after %d", ping.Data, prev)
			}
			prev = ping.Data
			c.send(t, 0, &wire.Pong{Data: ping.Data})
		}
		if !e.Ready() {
			t.Errorf("answered engine is %v", e.State())
		}
	})
	t.Run("unanswered PINGs drop the engine", func(t *testing.T) {
		eng := ttStartEngine(t, ttHandshake("e"), nil)
		p, _ := ttPool(t, func(c *Config) {
			c.PingInterval, c.PingTimeout, c.DropAfter = 20*time.Millisecond, 60*time.Millisecond, 200*time.Millisecond
		}, eng.addr)
		e := p.Engines()[0]
		c := eng.accept(t)
		ttReady(t, e)
		c.hangup(t) // PINGs, then the router gives up on the silent engine
		ttWaitFor(t, "not ready", func() bool { return !e.Ready() })
	})
}

// TestProtocolViolations: a frame an engine may not send closes the
// connection, and the router reconnects.
func TestProtocolViolations(t *testing.T) {
	cases := []struct {
		name   string
		stream uint32
		m      wire.Message
		lost   error
	}{
		{"GENERATE", 1, ttGenerate("m"), wire.ErrUnexpectedFrame},
		{"CANCEL", 1, &wire.Cancel{}, wire.ErrUnexpectedFrame},
		{"LOAD_REQUEST", 0, &wire.LoadRequest{}, wire.ErrUnexpectedFrame},
		{"SNAPSHOT_REQUEST", 0, &wire.SnapshotRequest{SnapshotID: 1}, wire.ErrUnexpectedFrame},
		{"HELLO after the handshake", 0, &wire.Hello{Handshake: ttHandshake("again")}, wire.ErrUnexpectedFrame},
		{"TOKENS with a finish reason but no LAST", 1, ttTok(0, wire.FinishStop), wire.ErrBadValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := ttStartEngine(t, ttHandshake("e"), nil)
			p, lg := ttPool(t, nil, eng.addr)
			e := p.Engines()[0]
			c := eng.accept(t)
			ttReady(t, e)
			s, _ := ttOpen(t, e, c)
			c.send(t, tc.stream, tc.m)
			c.hangup(t)
			if err := lg.firstLoss(t); !errors.Is(err, tc.lost) {
				t.Errorf("router's error %v, want %v", err, tc.lost)
			}
			if evs := ttCollect(t, s); !errors.Is(evs[len(evs)-1].Err, ErrEngineDown) {
				t.Errorf("open stream: %+v", evs)
			}
			ttReady(t, e) // reconnected
			eng.accept(t)
		})
	}
}

// TestProtocolViolationsAnswered: PROTOCOL.md section 8 says the router
// answers such a frame with ERROR PROTOCOL on stream 0 before closing.
func TestProtocolViolationsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream uint32
		m      wire.Message
	}{
		{"GENERATE", 1, ttGenerate("m")},
		{"TOKENS with undefined flags", 1, &wire.TokensMsg{Flags: 0x80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := ttStartEngine(t, ttHandshake("e"), nil)
			p, _ := ttPool(t, nil, eng.addr)
			c := eng.accept(t)
			ttReady(t, p.Engines()[0])
			c.send(t, tc.stream, tc.m)
			fs := c.hangup(t)
			var m wire.Error
			if len(fs) != 1 || wire.DecodeFrame(fs[0], &m, nil) != nil || m.Code != wire.CodeProtocol {
				t.Errorf("router sent %d frames before closing, want one ERROR PROTOCOL", len(fs))
			}
		})
	}
}

// TestEventsOffStreamZero: PROTOCOL.md section 8: KV_EVENTS or SNAPSHOT
// on a stream other than 0 is a protocol error (ERROR PROTOCOL, close).
func TestEventsOffStreamZero(t *testing.T) {
	_, p, e, c := ttConnected(t)
	slot, _ := e.Slot()
	c.send(t, 5, ttBatch(1, 0, ttStored(wire.TierGPU, ttChainA...)))
	c.hangup(t)
	if got := ttHeld(p.Index(), slot, ttChainA); got.Depth() != 0 {
		t.Errorf("KV_EVENTS on stream 5 applied: %+v", got)
	}
}

// TestCloseMidHandshake: Close returns at once even while an engine holds
// the router in its handshake.
func TestCloseMidHandshake(t *testing.T) {
	accepted := make(chan net.Conn, 1)
	addr := ttListen(t, func(nc net.Conn) {
		select { // hold the connection, answer nothing
		case accepted <- nc:
		default:
		}
	})
	p, _ := ttPool(t, func(c *Config) { c.DialTimeout = ttWait }, addr)
	select {
	case <-accepted:
	case <-time.After(ttWait):
		t.Fatal("the pool did not dial")
	}
	start := time.Now()
	p.Close()
	if took := time.Since(start); took > ttWait/4 {
		t.Errorf("Close took %v with an engine mid-handshake", took)
	}
}
