package engine

import (
	"errors"
	"fmt"

	"github.com/kvgate/kvgate/wire"
)

// Event is one step of a stream: tokens, the first-token facts, or the end.
type Event struct {
	Tokens []uint32
	// First marks the first frame; Cached is the prompt tokens the engine
	// served from its cache.
	First  bool
	Cached uint32
	// Last marks the end: Finish and usage, or Err.
	Last             bool
	Finish           wire.FinishReason
	PromptTokens     uint32
	CompletionTokens uint32
	Err              error
}

// Stream is one request on an engine connection. Events arrive on C; the
// last one has Last set. The engine's read loop never blocks on a stream:
// a consumer that falls StreamBuffer events behind is cancelled.
type Stream struct {
	C      <-chan Event
	c      chan Event
	e      *Engine
	id     uint32
	closed bool // guarded by e.mu
}

// StreamBuffer is how many events a stream holds for its consumer. The
// gateway drains streams at once (client writes never block it), so this
// only absorbs scheduling jitter; each event slot costs 64 bytes per request.
const StreamBuffer = 64

// ErrSlowConsumer ends a stream whose consumer stopped reading.
var ErrSlowConsumer = errors.New("engine: stream consumer too slow")

// ErrNotReady is returned when the engine takes no new requests.
var ErrNotReady = errors.New("engine: not ready")

// Generate sends a GENERATE and returns its stream.
func (e *Engine) Generate(g *wire.Generate) (*Stream, error) {
	e.mu.Lock()
	if e.State() != StateReady || e.conn == nil {
		e.mu.Unlock()
		return nil, ErrNotReady
	}
	for {
		e.nextStream++
		if e.nextStream == 0 {
			continue
		}
		if _, busy := e.streams[e.nextStream]; !busy {
			break
		}
	}
	ch := make(chan Event, StreamBuffer)
	s := &Stream{C: ch, c: ch, e: e, id: e.nextStream}
	e.streams[s.id] = s
	c := e.conn
	e.mu.Unlock()
	if err := c.Send(s.id, g); err != nil {
		e.mu.Lock()
		delete(e.streams, s.id)
		e.mu.Unlock()
		return nil, fmt.Errorf("sending GENERATE to %s: %w", e.Addr, err)
	}
	return s, nil
}

// Cancel asks the engine to stop the stream; its last event follows on C.
func (s *Stream) Cancel(reason wire.CancelReason) {
	s.e.mu.Lock()
	c, open := s.e.conn, !s.closed
	s.e.mu.Unlock()
	if open && c != nil {
		_ = c.Send(s.id, &wire.Cancel{Reason: reason})
	}
}

// Engine returns the engine serving the stream.
func (s *Stream) Engine() *Engine { return s.e }

func (e *Engine) deliverTokens(id uint32, m *wire.TokensMsg) {
	ev := Event{Tokens: m.Tokens.AppendTo(nil), First: m.First(), Cached: m.CachedTokens, Last: m.Last(),
		Finish: m.Finish, PromptTokens: m.PromptTokens, CompletionTokens: m.CompletionTokens}
	e.deliver(id, ev)
}

func (e *Engine) endStream(id uint32, err error) { e.deliver(id, Event{Last: true, Err: err}) }

func (e *Engine) deliver(id uint32, ev Event) {
	e.mu.Lock()
	s, ok := e.streams[id]
	if !ok {
		e.mu.Unlock()
		return // cancelled and forgotten, or never ours: the protocol says ignore
	}
	if ev.Last {
		delete(e.streams, id)
		s.closed = true
	}
	select {
	case s.c <- ev:
	default:
		// The consumer is not keeping up: end it rather than block every
		// other stream of this engine.
		delete(e.streams, id)
		s.closed = true
		c := e.conn
		e.mu.Unlock()
		if c != nil {
			_ = c.Send(id, &wire.Cancel{Reason: wire.CancelClientGone})
		}
		drainAndFail(s.c, ErrSlowConsumer)
		return
	}
	if ev.Last {
		close(s.c)
	}
	e.mu.Unlock()
}

// drainAndFail replaces a full stream's backlog by its error.
func drainAndFail(c chan Event, err error) {
	for {
		select {
		case <-c:
		default:
			c <- Event{Last: true, Err: err}
			close(c)
			return
		}
	}
}

// failStreams ends every open stream after the connection failed.
func (e *Engine) failStreams(err error) {
	e.mu.Lock()
	streams := e.streams
	e.streams = make(map[uint32]*Stream)
	e.conn = nil
	e.mu.Unlock()
	for _, s := range streams {
		s.closed = true
		drainAndFail(s.c, fmt.Errorf("%w: %v", ErrEngineDown, err))
	}
}
