package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	// Logprobs are Tokens' logprobs, one entry each, when the GENERATE
	// asked for them (wire.FeatureSampling); nil otherwise.
	Logprobs []wire.LogprobEntry
	// KVTransfer, on a prefill engine's hand-off frame (wire.TokHandoff),
	// are its transfer parameters (copied); nil otherwise.
	KVTransfer []byte
	Err        error
}

// Stream is one request on an engine connection. The engine's read loop
// never blocks on it: events queue on the stream, consecutive token frames
// merged into one event, and Ready signals that Take has something. A
// consumer that falls behind only makes the next Take larger; a client that
// stops reading is the HTTP layer's to cut off.
type Stream struct {
	e  *Engine
	id uint32

	mu     sync.Mutex
	queue  []Event
	free   []Event       // events Release handed back, for the next frames
	ready  chan struct{} // capacity 1: "queue is not empty"
	closed bool          // the last event is queued; guarded by e.mu for the stream table

	// started (first token seen) and frames (frames delivered) are set by
	// the read loop; the session's watcher compares frames with seen, its
	// own, to time the gap between tokens.
	started    atomic.Bool
	frames     atomic.Uint64
	seen       uint64
	quietSince time.Time
}

// Ready is signalled when events wait to be taken.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Take returns the queued events (nil if none). After the event with Last
// set has been taken, the stream is over. The events are the caller's
// until it hands them back with Release.
func (s *Stream) Take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// Release hands back events Take returned, once the caller is done with
// them (their Tokens included): the next frames are decoded into their
// arrays, so a stream that keeps up allocates nothing per frame.
func (s *Stream) Release(evs []Event) {
	s.mu.Lock()
	if s.free == nil && cap(evs) > 0 {
		s.free = evs[:0]
	}
	s.mu.Unlock()
}

// pushFrame queues a TOKENS frame's event: a plain one (neither first nor
// last) joins the plain event queued before it; ids are decoded straight
// into the queue's arrays.
func (s *Stream) pushFrame(m *wire.TokensMsg) {
	s.mu.Lock()
	n := len(s.queue)
	if n > 0 && !m.First() && !m.Last() {
		if last := &s.queue[n-1]; !last.Last && last.Err == nil {
			last.Tokens = m.Tokens.AppendTo(last.Tokens)
			if m.Flags&wire.TokLogprobs != 0 {
				last.Logprobs = append(last.Logprobs, m.Logprobs.Entries()...)
			}
			s.mu.Unlock()
			return
		}
	}
	if n == 0 && s.queue == nil {
		s.queue, s.free = s.free, nil
	}
	var buf []uint32
	if n < cap(s.queue) {
		buf = s.queue[:n+1][n].Tokens[:0] // a released event's array
	}
	ev := Event{Tokens: m.Tokens.AppendTo(buf), First: m.First(), Cached: m.CachedTokens, Last: m.Last(),
		Finish: m.Finish, PromptTokens: m.PromptTokens, CompletionTokens: m.CompletionTokens}
	if m.Flags&wire.TokLogprobs != 0 {
		ev.Logprobs = m.Logprobs.Entries()
	}
	if m.Flags&wire.TokHandoff != 0 {
		ev.KVTransfer = append([]byte(nil), m.KVTransfer...)
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.signal()
}

// push queues an event that ends the stream (or fails it).
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Generate sends a GENERATE and returns its stream. A GENERATE over the
// pool's wire limits is refused here (an error wrapping wire.ErrLimit or
// wire.ErrFrameTooLarge) and never sent: the engine would refuse it too,
// or, for a frame over its limit, end the connection and every stream on
// it. So are images (g.MMItems, g.Media) for an engine without
// wire.FeatureMultimodal (an error naming the feature, wrapping
// wire.ErrUnexpectedFrame). The images' bytes follow the GENERATE on its
// stream in MEDIA frames (wire.Writer.SendGenerate), before Generate
// returns.
func (e *Engine) Generate(g *wire.Generate) (*Stream, error) {
	if err := g.CheckLimits(&e.pool.cfg.Limits); err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.Addr, err)
	}
	if err := g.CheckFeatures(e.Features()); err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.Addr, err)
	}
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
	s := &Stream{e: e, id: e.nextStream, ready: make(chan struct{}, 1)}
	e.streams[s.id] = s
	c := e.conn
	e.mu.Unlock()
	if err := c.SendGenerate(s.id, g); err != nil {
		e.mu.Lock()
		delete(e.streams, s.id)
		e.mu.Unlock()
		if c.Err() != nil { // the write failed (or timed out): the connection is done
			_ = c.Close()
			return nil, fmt.Errorf("sending GENERATE to %s: %w: %w", e.Addr, ErrEngineDown, err)
		}
		return nil, fmt.Errorf("sending GENERATE to %s: %w", e.Addr, err) // this request did not encode
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
	if s := e.open(id, m.Last()); s != nil {
		if m.First() {
			s.started.Store(true)
		}
		s.frames.Add(1)
		s.pushFrame(m)
	}
}

func (e *Engine) endStream(id uint32, err error) {
	if s := e.open(id, true); s != nil {
		s.frames.Add(1)
		s.push(Event{Last: true, Err: err})
	}
}

// open returns stream id if it takes events (nil: cancelled and
// forgotten, or never ours: the protocol says ignore), closing it in the
// table when last.
func (e *Engine) open(id uint32, last bool) *Stream {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.streams[id]
	if !ok || s.closed { // ended here already (abandon): only the engine's end is awaited
		if ok && last {
			delete(e.streams, id)
		}
		return nil
	}
	if last {
		delete(e.streams, id)
		s.closed = true
	}
	return s
}

// abandon ends the open streams that pick chooses with err, for their
// consumers, and sends CANCEL (reason) for each on c. Each stays in the
// table, its id not reused, until the engine ends it (PROTOCOL.md 5); what
// the engine still sends for it is dropped. It returns how many it ended.
func (e *Engine) abandon(c *wire.Conn, pick func(*Stream) bool, err error, reason wire.CancelReason) int {
	e.mu.Lock()
	var ended []*Stream
	for _, s := range e.streams {
		if !s.closed && pick(s) {
			s.closed = true
			ended = append(ended, s)
		}
	}
	e.mu.Unlock()
	for _, s := range ended {
		s.push(Event{Last: true, Err: err})
		_ = c.Queue(s.id, &wire.Cancel{Reason: reason})
	}
	if len(ended) > 0 && c.Flush() != nil {
		_ = c.Close() // the write failed or timed out: the session ends
	}
	return len(ended)
}

// failStreams ends every open stream after the connection failed.
func (e *Engine) failStreams(err error) {
	e.mu.Lock()
	streams := e.streams
	e.streams = make(map[uint32]*Stream)
	e.conn = nil
	var open []*Stream
	for _, s := range streams {
		if !s.closed {
			s.closed = true
			open = append(open, s)
		}
	}
	e.mu.Unlock()
	for _, s := range open {
		s.push(Event{Last: true, Err: fmt.Errorf("%w: %v", ErrEngineDown, err)})
	}
}
