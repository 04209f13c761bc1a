package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// The watcher is the one goroutine that times a session: netpoll applies a
// read deadline only when a read starts, and the read loop is always in
// one, so reads are timed here, against the count of frames the read loop
// has read and handled (heard, odd while it handles one), at a tick of
// watchTick. It owns the session's PINGs,
// the unresponsive state and the gaps between a stream's tokens.

// watchTick returns the watcher's period: fine enough for the shortest
// timeout it enforces (the snapshot wait included), never busier than 5 ms
// nor lazier than a second.
func watchTick(cfg *Config) time.Duration {
	d := min(cfg.PingInterval, cfg.PingTimeout/4, cfg.SnapshotWait/4)
	if cfg.TokenTimeout > 0 {
		d = min(d, cfg.TokenTimeout/4)
	}
	return min(max(d, 5*time.Millisecond), time.Second)
}

// watch runs beside the read loop until stop closes. Every tick it
//   - notes whether a frame arrived (any frame answers a PING: an engine
//     busy streaming tokens may answer it late);
//   - PINGs every PingInterval, remembering when the first PING that no
//     frame has followed went out (unanswered);
//   - marks the engine unresponsive once that PING is PingTimeout old,
//     and ready again at the next frame;
//   - closes silent and the connection once it is DropAfter old;
//   - ends started streams that have had no frame for TokenTimeout;
//   - admits the engine at admitBy (when not zero) if its snapshot has not
//     admitted it before.
func (e *Engine) watch(c *wire.Conn, stop <-chan struct{}, heard *atomic.Uint64, silent chan<- struct{}, admitBy time.Time) {
	cfg := &e.pool.cfg
	t := time.NewTicker(watchTick(cfg))
	defer t.Stop()
	var (
		last       = heard.Load()
		lastPing   = time.Now() // the first PING goes out one interval in
		unanswered time.Time    // zero: every PING so far was followed by a frame
		prev       State        // the state before unresponsive
		hung       bool
		n          uint64
	)
	for {
		var now time.Time
		select {
		case <-stop:
			return
		case now = <-t.C:
		}
		if h := heard.Load(); h != last || h%2 == 1 { // a frame came, or one is being handled
			last, unanswered = h, time.Time{}
			if hung {
				hung = false
				if e.state.CompareAndSwap(int32(StateUnresponsive), int32(prev)) {
					e.log.Info("engine answering again: ready", "engine", e.Addr, "state", prev.String())
				}
			}
		}
		if now.Sub(lastPing) >= cfg.PingInterval {
			n++
			lastPing = now
			if unanswered.IsZero() {
				unanswered = now
			}
			if c.Send(0, &wire.Ping{Data: n}) != nil {
				_ = c.Close() // the write failed or timed out: the read loop returns
				return
			}
		}
		if !unanswered.IsZero() {
			quiet := now.Sub(unanswered)
			if quiet >= cfg.DropAfter {
				close(silent)
				_ = c.Close()
				return
			}
			if !hung && quiet >= cfg.PingTimeout {
				prev, hung = e.becomeUnresponsive(c, quiet)
			}
		}
		if cfg.TokenTimeout > 0 {
			e.endQuietStreams(c, now, cfg.TokenTimeout)
		}
		if !admitBy.IsZero() && !now.Before(admitBy) {
			admitBy = time.Time{}
			e.admit("no snapshot within the snapshot wait")
		}
	}
}

// admit makes a connecting engine ready: its snapshot is in the index, or
// the wait for it is over. Only the session's goroutines call it.
func (e *Engine) admit(why string) {
	if e.state.CompareAndSwap(int32(StateConnecting), int32(StateReady)) {
		e.log.Debug("engine admitted", "engine", e.Addr, "why", why)
	}
}

// becomeUnresponsive takes a ready or draining engine out of routing and
// ends its open streams, reporting the state to restore and whether it
// did (a connecting or down engine is left alone).
func (e *Engine) becomeUnresponsive(c *wire.Conn, quiet time.Duration) (prev State, ok bool) {
	for {
		prev = e.State()
		if prev != StateReady && prev != StateDraining {
			return prev, false
		}
		if e.state.CompareAndSwap(int32(prev), int32(StateUnresponsive)) {
			break
		}
	}
	err := fmt.Errorf("%w (nothing for %v after a PING): %w", ErrUnresponsive, quiet.Round(time.Millisecond), ErrEngineDown)
	n := e.abandon(c, func(*Stream) bool { return true }, err, wire.CancelTimeout)
	e.log.Warn("engine unresponsive: not ready", "engine", e.Addr, "quiet", quiet.String(), "streams_ended", n)
	return prev, true
}

// endQuietStreams ends the started streams that have had no frame for
// timeout, cancelling them on the engine.
func (e *Engine) endQuietStreams(c *wire.Conn, now time.Time, timeout time.Duration) {
	quiet := func(s *Stream) bool { // under e.mu; seen and quietSince are the watcher's
		if !s.started.Load() {
			return false
		}
		if f := s.frames.Load(); f != s.seen || s.quietSince.IsZero() {
			s.seen, s.quietSince = f, now
			return false
		}
		return now.Sub(s.quietSince) >= timeout
	}
	err := fmt.Errorf("%w (%v)", ErrTokenTimeout, timeout)
	if n := e.abandon(c, quiet, err, wire.CancelTimeout); n > 0 {
		e.log.Warn("streams without a token in time: ended", "engine", e.Addr, "streams", n, "token_timeout", timeout.String())
	}
}
