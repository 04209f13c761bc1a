package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// ttTok is a TOKENS frame.
func ttTok(flags wire.TokensFlags, finish wire.FinishReason, ids ...uint32) *wire.TokensMsg {
	return &wire.TokensMsg{Flags: flags, Finish: finish, Tokens: wire.TokensOf(ids)}
}

// ttUsage sets a frame's cache and usage counts.
func ttUsage(m *wire.TokensMsg, cached, prompt, completion uint32) *wire.TokensMsg {
	m.CachedTokens, m.PromptTokens, m.CompletionTokens = cached, prompt, completion
	return m
}

// TestStreamFrames: what the engine sends on a stream becomes its events:
// tokens in order, FIRST (with the cached count) on the first event only,
// LAST (finish reason and usage, or the ERROR as ev.Err) on the last only;
// the stream then leaves the table and the connection serves on.
func TestStreamFrames(t *testing.T) {
	first, last, both := wire.TokFirst, wire.TokLast, wire.TokFirst|wire.TokLast
	cases := []struct {
		name               string
		frames             []wire.Message
		tokens             []uint32
		cached             uint32
		hasFirst           bool
		finish             wire.FinishReason
		prompt, completion uint32
		code               wire.ErrorCode // the stream ERROR ending the stream; 0: none
	}{
		{name: "one frame both first and last", frames: []wire.Message{
			ttUsage(ttTok(both, wire.FinishStop, 7), 4, 4, 1),
		}, tokens: []uint32{7}, cached: 4, hasFirst: true, finish: wire.FinishStop, prompt: 4, completion: 1},
		{name: "frames in order, length", frames: []wire.Message{
			ttUsage(ttTok(first, 0, 1, 2), 2, 0, 0),
			ttTok(0, 0, 3),
			ttTok(0, 0, 4, 5),
			ttTok(0, 0),
			ttUsage(ttTok(last, wire.FinishLength, 6), 0, 4, 6),
		}, tokens: []uint32{1, 2, 3, 4, 5, 6}, cached: 2, hasFirst: true, finish: wire.FinishLength, prompt: 4, completion: 6},
		{name: "empty last frame, cancelled", frames: []wire.Message{
			ttTok(first, 0, 9),
			ttUsage(ttTok(last, wire.FinishCancelled), 0, 4, 1),
		}, tokens: []uint32{9}, hasFirst: true, finish: wire.FinishCancelled, prompt: 4, completion: 1},
		{name: "abort", frames: []wire.Message{
			ttUsage(ttTok(first, 0), 3, 0, 0),
			ttUsage(ttTok(last, wire.FinishAbort), 0, 4, 0),
		}, cached: 3, hasFirst: true, finish: wire.FinishAbort, prompt: 4},
		{name: "ERROR before any token", frames: []wire.Message{
			&wire.Error{Code: wire.CodeOverloaded, Message: "queue full"},
		}, code: wire.CodeOverloaded},
		{name: "ERROR unknown LoRA", frames: []wire.Message{
			&wire.Error{Code: wire.CodeUnknownLoRA, Message: "no adapter 3"},
		}, code: wire.CodeUnknownLoRA},
		{name: "ERROR after tokens", frames: []wire.Message{
			ttTok(first, 0, 1, 2),
			ttTok(0, 0, 3),
			&wire.Error{Code: wire.CodeStreamFailed, Message: "GPU fell over"},
		}, tokens: []uint32{1, 2, 3}, hasFirst: true, code: wire.CodeStreamFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, e, c := ttConnected(t)
			s, _ := ttOpen(t, e, c)
			if s.Engine() != e || e.OpenStreams() != 1 {
				t.Fatalf("stream's engine %p (want %p), open streams %d (want 1)", s.Engine(), e, e.OpenStreams())
			}
			for _, m := range tc.frames {
				c.send(t, s.id, m)
			}
			evs := ttCollect(t, s)

			if got := ttTokens(evs); !slices.Equal(got, tc.tokens) {
				t.Errorf("tokens %v, want %v", got, tc.tokens)
			}
			for i, ev := range evs {
				if ev.First != (tc.hasFirst && i == 0) {
					t.Errorf("event %d of %d: First %v", i, len(evs), ev.First)
				}
				if i > 0 && ev.Cached != 0 {
					t.Errorf("event %d: Cached %d outside the first event", i, ev.Cached)
				}
				if i < len(evs)-1 && (ev.Last || ev.Err != nil) {
					t.Errorf("event %d of %d ends the stream early: %+v", i, len(evs), ev)
				}
			}
			if tc.hasFirst && evs[0].Cached != tc.cached {
				t.Errorf("Cached %d, want %d", evs[0].Cached, tc.cached)
			}
			end := evs[len(evs)-1]
			if end.Finish != tc.finish || end.PromptTokens != tc.prompt || end.CompletionTokens != tc.completion {
				t.Errorf("last event: finish %v usage %d/%d, want %v %d/%d",
					end.Finish, end.PromptTokens, end.CompletionTokens, tc.finish, tc.prompt, tc.completion)
			}
			var re *wire.RemoteError
			switch {
			case tc.code == 0 && end.Err != nil:
				t.Errorf("last event: Err %v, want none", end.Err)
			case tc.code != 0 && !errors.As(end.Err, &re):
				t.Errorf("last event: Err %v, want a wire.RemoteError", end.Err)
			case tc.code != 0 && (re.Code != tc.code || re.Stream != s.id):
				t.Errorf("last event: ERROR %v on stream %d, want %v on %d", re.Code, re.Stream, tc.code, s.id)
			case errors.Is(end.Err, ErrEngineDown):
				t.Errorf("a stream ERROR reads as ErrEngineDown: %v", end.Err)
			}

			if n := e.OpenStreams(); n != 0 {
				t.Errorf("%d streams open after the last event", n)
			}
			// The stream ended, the connection did not.
			s2, _ := ttOpen(t, e, c)
			c.send(t, s2.id, ttTok(both, wire.FinishStop, 5))
			if evs := ttCollect(t, s2); !slices.Equal(ttTokens(evs), []uint32{5}) || evs[len(evs)-1].Err != nil {
				t.Errorf("next stream: %+v", evs)
			}
		})
	}
}

// TestStreamStrayFrames: TOKENS and ERROR for streams the router does not
// have open (never opened, or already ended) are dropped and change nothing.
func TestStreamStrayFrames(t *testing.T) {
	_, _, e, c := ttConnected(t)
	ended, _ := ttOpen(t, e, c)
	c.send(t, ended.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 1))
	ttCollect(t, ended)

	for _, tc := range []struct {
		name   string
		stream uint32
		m      wire.Message
	}{
		{"TOKENS for a stream never opened", 999, ttTok(wire.TokFirst, 0, 66)},
		{"ERROR for a stream never opened", 998, &wire.Error{Code: wire.CodeStreamFailed}},
		{"TOKENS after the stream's LAST", ended.id, ttTok(0, 0, 77)},
		{"ERROR after the stream's LAST", ended.id, &wire.Error{Code: wire.CodeStreamFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(t, tc.stream, tc.m)
			// A stream opened after it is served: the stray frame was read
			// and dropped first, on the same connection.
			s, _ := ttOpen(t, e, c)
			c.send(t, s.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 5))
			if evs := ttCollect(t, s); !slices.Equal(ttTokens(evs), []uint32{5}) || evs[0].Err != nil {
				t.Errorf("stream after a stray frame: %+v", evs)
			}
			if got := ended.Take(); got != nil {
				t.Errorf("the ended stream got %+v", got)
			}
			if !e.Ready() || e.OpenStreams() != 0 {
				t.Errorf("after a stray frame: %v with %d open streams", e.State(), e.OpenStreams())
			}
		})
	}
}

// TestCancel: Cancel sends CANCEL with its reason on the stream's id, the
// engine's answer ends the stream, and Cancel on an ended stream sends
// nothing.
func TestCancel(t *testing.T) {
	cases := []struct {
		name   string
		reason wire.CancelReason
		answer wire.Message // how the engine ends the stream
		finish wire.FinishReason
		code   wire.ErrorCode
	}{
		{"client gone", wire.CancelClientGone, ttTok(wire.TokLast, wire.FinishCancelled), wire.FinishCancelled, 0},
		{"timeout", wire.CancelTimeout, ttTok(wire.TokLast, wire.FinishCancelled), wire.FinishCancelled, 0},
		{"shutdown", wire.CancelShutdown, ttTok(wire.TokLast, wire.FinishCancelled), wire.FinishCancelled, 0},
		{"rerouted, answered by ERROR cancelled", wire.CancelRerouted, &wire.Error{Code: wire.CodeCancelled}, 0, wire.CodeCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, e, c := ttConnected(t)
			s, _ := ttOpen(t, e, c)
			c.send(t, s.id, ttTok(wire.TokFirst, 0, 1))

			s.Cancel(tc.reason)
			var m wire.Cancel
			if f := c.expect(t, &m); f.Stream != s.id || m.Reason != tc.reason {
				t.Fatalf("CANCEL on stream %d reason %d, want stream %d reason %d", f.Stream, m.Reason, s.id, tc.reason)
			}
			c.send(t, s.id, tc.answer)
			evs := ttCollect(t, s)
			end := evs[len(evs)-1]
			var re *wire.RemoteError
			if end.Finish != tc.finish || (tc.code == 0) != (end.Err == nil) ||
				(tc.code != 0 && (!errors.As(end.Err, &re) || re.Code != tc.code)) {
				t.Errorf("cancelled stream ended with finish %v err %v; want %v, code %v", end.Finish, end.Err, tc.finish, tc.code)
			}
			if !slices.Equal(ttTokens(evs), []uint32{1}) {
				t.Errorf("tokens %v, want [1]", ttTokens(evs))
			}

			s.Cancel(tc.reason) // ended: nothing to send
			ttOpen(t, e, c)     // the next frame the engine reads is this GENERATE, not a CANCEL
		})
	}
}

// TestStreamsInterleaved: frames of many streams interleaved on one
// connection reach each its own stream, in order; ids are distinct and
// never 0.
func TestStreamsInterleaved(t *testing.T) {
	const n, rounds = 8, 20
	_, _, e, c := ttConnected(t)
	streams := make([]*Stream, n)
	ids := map[uint32]bool{}
	for i := range streams {
		streams[i], _ = ttOpen(t, e, c)
		if id := streams[i].id; id == 0 || ids[id] {
			t.Fatalf("stream id %d (ids so far %v)", id, ids)
		}
		ids[streams[i].id] = true
	}
	if e.OpenStreams() != n {
		t.Fatalf("%d open streams, want %d", e.OpenStreams(), n)
	}
	want := make([][]uint32, n)
	for r := range rounds {
		for i, s := range streams {
			tok := uint32(1000*i + r)
			want[i] = append(want[i], tok)
			flags := wire.TokensFlags(0)
			if r == 0 {
				flags = wire.TokFirst
			}
			c.send(t, s.id, ttUsage(ttTok(flags, 0, tok), uint32(i), 0, 0))
		}
	}
	for i, s := range streams {
		c.send(t, s.id, ttUsage(ttTok(wire.TokLast, wire.FinishStop), 0, 4, uint32(100+i)))
	}
	for i, s := range streams {
		evs := ttCollect(t, s)
		if got := ttTokens(evs); !slices.Equal(got, want[i]) {
			t.Errorf("stream %d: tokens %v, want %v", s.id, got, want[i])
		}
		if evs[0].Cached != uint32(i) || evs[len(evs)-1].CompletionTokens != uint32(100+i) {
			t.Errorf("stream %d: cached %d completion %d, want %d %d", s.id, evs[0].Cached,
				evs[len(evs)-1].CompletionTokens, i, 100+i)
		}
	}
	if e.OpenStreams() != 0 {
		t.Errorf("%d open streams after all ended", e.OpenStreams())
	}
}

// TestEngineDeath: when an engine's connection dies, each of its open
// streams ends with ErrEngineDown, once; its ended streams and every
// stream of another engine get nothing.
func TestEngineDeath(t *testing.T) {
	cases := []struct {
		name string
		kill func(t *testing.T, eng *ttEngine, c *ttConn)
		// cause checks what the router logs as the reason.
		cause func(error) bool
	}{
		{"the engine process dies", func(t *testing.T, eng *ttEngine, c *ttConn) { eng.stop() },
			func(err error) bool { return err != nil }},
		{"the engine sends ERROR on stream 0", func(t *testing.T, eng *ttEngine, c *ttConn) {
			c.send(t, 0, &wire.Error{Code: wire.CodeInternal, Message: "out of memory"})
			c.hangup(t)
			eng.stop()
		}, func(err error) bool {
			var re *wire.RemoteError
			return errors.As(err, &re) && re.Code == wire.CodeInternal && re.Stream == 0
		}},
		{"the engine breaks the protocol", func(t *testing.T, eng *ttEngine, c *ttConn) {
			c.send(t, 0, &wire.TokensMsg{Flags: 0x80}) // undefined flag bits
			c.hangup(t)
			eng.stop()
		}, func(err error) bool { return errors.Is(err, wire.ErrBadValue) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			engA := ttStartEngine(t, ttHandshake("a"), nil)
			engB := ttStartEngine(t, ttHandshake("b"), nil)
			p, lg := ttPool(t, nil, engA.addr, engB.addr)
			a, b := p.Engines()[0], p.Engines()[1]
			ca, cb := engA.accept(t), engB.accept(t)
			ttReady(t, a)
			ttReady(t, b)

			ended, _ := ttOpen(t, a, ca)
			ca.send(t, ended.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 1))
			ttCollect(t, ended)
			open1, _ := ttOpen(t, a, ca)
			open2, _ := ttOpen(t, a, ca)
			ca.send(t, open1.id, ttTok(wire.TokFirst, 0, 10, 11))
			other, _ := ttOpen(t, b, cb)
			cb.send(t, other.id, ttTok(wire.TokFirst, 0, 20))

			tc.kill(t, engA, ca)
			for _, s := range []*Stream{open1, open2} {
				evs := ttCollect(t, s)
				end := evs[len(evs)-1]
				if !errors.Is(end.Err, ErrEngineDown) {
					t.Errorf("stream %d of the dead engine ended with %v, want ErrEngineDown", s.id, end.Err)
				}
				if !end.Last || end.Finish != wire.FinishNone {
					t.Errorf("stream %d: last event %+v", s.id, end)
				}
			}
			if evs := ended.Take(); evs != nil {
				t.Errorf("a stream that had ended got %+v", evs)
			}
			if n := a.OpenStreams(); n != 0 {
				t.Errorf("the dead engine has %d open streams", n)
			}
			if _, err := a.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
				t.Errorf("Generate on the dead engine: %v, want ErrNotReady", err)
			}
			open1.Cancel(wire.CancelRerouted) // nothing to send it on; must not block or panic

			if !b.Ready() {
				t.Errorf("the other engine is %v", b.State())
			}
			cb.send(t, other.id, ttTok(wire.TokLast, wire.FinishStop, 21))
			evs := ttCollect(t, other)
			if !slices.Equal(ttTokens(evs), []uint32{20, 21}) || evs[len(evs)-1].Err != nil {
				t.Errorf("the other engine's stream: %+v", evs)
			}
			if err := lg.firstLoss(t); !tc.cause(err) {
				t.Errorf("logged cause: %v", err)
			}
		})
	}
}

// TestStreamsConcurrent: many goroutines opening, reading and cancelling
// streams on one engine at once (run under -race) each get their own
// stream's events, and the table empties.
func TestStreamsConcurrent(t *testing.T) {
	const workers, each = 8, 25
	_, p, e, c := ttConnected(t)

	// The engine answers each GENERATE with the stream id as its token, in
	// two frames, and each CANCEL with a cancelled last frame (a stream
	// already ended ignores that).
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		for f := range c.frames {
			switch f.Type {
			case wire.TypeGenerate:
				_ = c.Send(f.Stream, ttTok(wire.TokFirst, 0, f.Stream))
				_ = c.Send(f.Stream, ttTok(wire.TokLast, wire.FinishStop, f.Stream))
			case wire.TypeCancel:
				_ = c.Send(f.Stream, ttTok(wire.TokLast, wire.FinishCancelled))
			}
		}
	}()

	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				s, err := e.Generate(ttGenerate("m"))
				if err != nil {
					errs <- err
					return
				}
				if (w+i)%3 == 0 {
					s.Cancel(wire.CancelClientGone)
				}
				var toks []uint32
				for done := false; !done; {
					select {
					case <-s.Ready():
					case <-time.After(ttWait):
						errs <- fmt.Errorf("stream %d: no last event", s.id)
						return
					}
					for _, ev := range s.Take() {
						toks = append(toks, ev.Tokens...)
						done = done || ev.Last
						if ev.Err != nil {
							errs <- fmt.Errorf("stream %d: %w", s.id, ev.Err)
						}
					}
				}
				for _, tok := range toks {
					if tok != s.id {
						errs <- fmt.Errorf("stream %d got token %d", s.id, tok)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := e.OpenStreams(); n != 0 {
		t.Errorf("%d streams open at the end", n)
	}
	p.Close()
	<-answered
}
