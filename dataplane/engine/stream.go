package engine

import (
	"fmt"
	"runtime"
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
// never waits for its consumer: events queue on the stream, consecutive
// token frames merged into one event, and Ready signals that Take has
// something. A consumer that falls behind only makes the next Take larger;
// a client that stops reading is the HTTP layer's to cut off.
//
// A consumer may instead Attach a Sink: the read loop then hands it the
// stream's plain events (tokens, neither first nor last) itself, a read's
// worth at a time, with no goroutine woken (sink.go).
type Stream struct {
	e  *Engine
	id uint32

	mu    sync.Mutex
	queue []Event
	free  []Event       // events Release handed back, for the next frames
	ready chan struct{} // capacity 1: "queue is not empty"
	// closed: the last event is queued; set under e.mu with the stream
	// table, read by the read loop without it (streams.go).
	closed atomic.Bool
	// The sink's state (sink.go), under mu: taken says the consumer is
	// handling events Take returned (until Release), dirty that the stream
	// is in the read loop's batch, inline that the read loop is in
	// sink.Deliver, ended that Deliver returned false.
	sink                        Sink
	taken, dirty, inline, ended bool
	detaching                   bool
	idle                        sync.Cond // Detach waits on it for an inline delivery to return

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
// until it hands them back with Release. While the read loop delivers
// events to the stream's sink (sink.go), Take returns nil, and Ready is
// signalled again after the delivery if more queued meanwhile.
func (s *Stream) Take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inline {
		return nil
	}
	q := s.queue
	s.queue = nil
	s.taken = s.sink != nil && len(q) > 0
	return q
}

// Release hands back events Take returned, once the caller is done with
// them (their Tokens included): the next frames are decoded into their
// arrays, so a stream that keeps up allocates nothing per frame. With a
// sink attached, the read loop delivers to it again from here on.
func (s *Stream) Release(evs []Event) {
	s.mu.Lock()
	if s.free == nil && cap(evs) > 0 {
		s.free = evs[:0]
	}
	s.taken = false
	s.mu.Unlock()
}

// pushFrame queues a TOKENS frame's event: a plain one (neither first nor
// last) joins the plain event queued before it; ids are decoded straight
// into the queue's arrays. With a sink attached, a plain frame waits for
// the read loop's batch (sink.go) instead of waking the consumer: batch
// says the stream has to join it.
func (s *Stream) pushFrame(m *wire.TokensMsg) (batch bool) {
	s.mu.Lock()
	if !s.queueFrame(m) {
		s.mu.Unlock()
		return false // joined a queued event: its wake (or batch) is on its way
	}
	if s.sink != nil && !m.First() && !m.Last() {
		batch = !s.dirty
		s.dirty = true
		s.mu.Unlock()
		return batch
	}
	s.mu.Unlock()
	s.signal()
	return false
}

// queueFrame queues m, with s.mu held; false when m joined the event
// before it.
func (s *Stream) queueFrame(m *wire.TokensMsg) (added bool) {
	n := len(s.queue)
	if n > 0 && !m.First() && !m.Last() {
		if last := &s.queue[n-1]; !last.Last && last.Err == nil {
			last.Tokens = m.Tokens.AppendTo(last.Tokens)
			if m.Flags&wire.TokLogprobs != 0 {
				last.Logprobs = append(last.Logprobs, m.Logprobs.Entries()...)
			}
			return false
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
	return true
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
	s := e.newStream()
	c := e.conn
	e.mu.Unlock()
	if err := sendGenerate(c, s.id, g); err != nil {
		e.mu.Lock()
		e.table().remove(s)
		e.mu.Unlock()
		if c.Err() != nil { // the write failed (or timed out): the connection is done
			_ = c.Close()
			return nil, fmt.Errorf("sending GENERATE to %s: %w: %w", e.Addr, ErrEngineDown, err)
		}
		return nil, fmt.Errorf("sending GENERATE to %s: %w", e.Addr, err) // this request did not encode
	}
	return s, nil
}

// sendGenerate queues g on c, lets the other runnable goroutines run,
// then flushes. Handlers that are about to send their own GENERATEs to
// the same engine (requests that came in together) queue them meanwhile,
// and one write carries them all: the first Flush takes every frame
// pending, and the later ones find nothing left. With nothing else
// runnable, Gosched returns at once and the frame leaves as before; with
// others runnable, it waits at most for them to block or be preempted,
// or for one of them to flush it. One system call a GENERATE was the
// router's largest single cost after the client's own writes: with 32
// clients and 4 engines on 2 cores, sendmsg calls went from 1.0 to 0.4 a
// request (perf/RESULTS.md, Session 15).
func sendGenerate(c *wire.Conn, stream uint32, g *wire.Generate) error {
	if err := c.QueueGenerate(stream, g); err != nil {
		return err
	}
	runtime.Gosched()
	return c.Flush()
}

// Cancel asks the engine to stop the stream; its last event follows on C.
func (s *Stream) Cancel(reason wire.CancelReason) {
	s.e.mu.Lock()
	c, open := s.e.conn, !s.closed.Load()
	s.e.mu.Unlock()
	if open && c != nil {
		_ = c.Send(s.id, &wire.Cancel{Reason: reason})
	}
}

// Engine returns the engine serving the stream.
func (s *Stream) Engine() *Engine { return s.e }

// deliverTokens hands a TOKENS frame to its stream; a stream whose sink
// is to take it joins b.
func (e *Engine) deliverTokens(id uint32, m *wire.TokensMsg, b *sinkBatch) {
	if s := e.open(id, m.Last()); s != nil {
		if m.First() {
			s.started.Store(true)
		}
		s.frames.Add(1)
		if s.pushFrame(m) {
			b.streams = append(b.streams, s)
		}
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
// table when last. Only a last frame takes e.mu (streams.go).
func (e *Engine) open(id uint32, last bool) *Stream {
	if !last {
		if s := e.table().lookup(id); s != nil && !s.closed.Load() {
			return s
		}
		return nil // or ended here already (abandon): only the engine's end is awaited
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.table().lookup(id)
	if s == nil {
		return nil
	}
	e.table().remove(s)
	if s.closed.Swap(true) {
		return nil
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
	e.table().each(func(s *Stream) {
		if !s.closed.Load() && pick(s) {
			s.closed.Store(true)
			ended = append(ended, s)
		}
	})
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
	streams := e.table()
	e.streams.Store(newStreamTable(streamTableMin))
	e.conn = nil
	var open []*Stream
	streams.each(func(s *Stream) {
		if !s.closed.Swap(true) {
			open = append(open, s)
		}
	})
	e.mu.Unlock()
	for _, s := range open {
		s.push(Event{Last: true, Err: fmt.Errorf("%w: %v", ErrEngineDown, err)})
	}
}
