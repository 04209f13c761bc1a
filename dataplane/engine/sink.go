package engine

import "github.com/cloudwego/netpoll"

// A stream's consumer, woken for every event, costs a goroutine wake and
// park per event, and at thousands of streams a cache miss on each cold
// goroutine: about a third of the router's CPU per streamed token. A Sink
// takes the stream's plain events on the read loop instead: the consumer's
// goroutine then waits only for what is not a plain event (the first
// frame, the last, an error, its client leaving).
//
// Plain frames still queue on the stream, merged as before, and the stream
// joins the read loop's batch. The batch goes to the sinks (flush) when the
// read loop's next read from the socket would wait for the engine
// (batchConn), when sinkBatchBytes have been read since the last one, and
// before a SNAPSHOT or a PING (whose handling may take a while). A read
// loop that keeps up thus hands each frame on at once, and one that is
// behind merges each stream's frames that were waiting into one event.
//
// Events keep their order: the queue holds them all, and a sink gets a
// stream's queue only when the consumer is not handling events it took
// (Take to Release) and the queue holds nothing but plain events (else the
// consumer is woken and takes them all). Deliver and the consumer's
// handling never run at once, so the consumer may share its state with the
// sink without a lock of its own: Stream.mu orders them. Stream.mu is not
// held during Deliver; the read loop holds no lock then.

// Sink takes a stream's plain events (tokens, neither first nor last) on
// the engine's read loop.
type Sink interface {
	// Deliver handles one plain event. It runs on the read loop of every
	// stream of the engine, so it must not wait (a write that would wait
	// for a slow client fails or cuts it off instead), and it must not
	// keep ev's arrays. It returns false once the stream needs nothing
	// more from the read loop (the sink ended the request: a stop string,
	// its client gone); Ready is then signalled and SinkEnded reports it.
	Deliver(ev *Event) (more bool)
}

// sinkMaxTokens bounds the events a sink takes: a larger one (a consumer
// far behind) is the consumer goroutine's, so the read loop never writes
// a long output for one stream while the others wait.
const sinkMaxTokens = 1024

// sinkBatchBytes bounds the frames read before the batch goes to the sinks.
const sinkBatchBytes = 1 << 20

// sinkBatch is the read loop's list of streams with plain events for their
// sinks (Stream.dirty marks them), owned by the read loop.
type sinkBatch struct {
	poll    netpoll.Reader // the socket's buffer (nil in tests: always empty)
	streams []*Stream
	bytes   int // read from the socket since the last flush
}

// batchConn is the engine's connection as its wire.Conn reads it: before a
// read from the socket, the batch goes to the sinks if the read would wait
// for the engine (nothing buffered) or the batch is full.
type batchConn struct {
	netpoll.Connection
	b *sinkBatch
}

// Read implements io.Reader.
func (c *batchConn) Read(p []byte) (int, error) {
	b := c.b
	if len(b.streams) > 0 && (b.bytes >= sinkBatchBytes || b.poll.Len() == 0) {
		b.flush()
	}
	n, err := c.Connection.Read(p)
	b.bytes += n
	return n, err
}

// flush hands each batched stream's plain events to its sink.
func (b *sinkBatch) flush() {
	for i, s := range b.streams {
		s.drainToSink()
		b.streams[i] = nil
	}
	b.streams, b.bytes = b.streams[:0], 0
}

// sinkable reports whether a sink may take q: plain events only, without
// logprobs (whose encoding is large), of at most sinkMaxTokens tokens.
func sinkable(q []Event) bool {
	n := 0
	for i := range q {
		ev := &q[i]
		if ev.First || ev.Last || ev.Err != nil || ev.Logprobs != nil || ev.KVTransfer != nil {
			return false
		}
		n += len(ev.Tokens)
	}
	return n <= sinkMaxTokens
}

// Attach makes sink take the stream's plain events on the read loop, from
// the next frame on. Call it from the consumer, at most once, when it is
// done handling what it took (before Release is fine: the read loop waits
// for that), and Detach before it lets go of the sink's state.
func (s *Stream) Attach(sink Sink) {
	s.mu.Lock()
	s.sink = sink
	s.mu.Unlock()
}

// Detach stops deliveries to the stream's sink and waits for one in
// progress to return. It reports whether the sink ended the stream
// (SinkEnded). Frames after it queue for Take, and wake the consumer.
func (s *Stream) Detach() (ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = nil
	for s.inline {
		if s.idle.L == nil {
			s.idle.L = &s.mu
		}
		s.detaching = true
		s.idle.Wait()
	}
	s.detaching = false
	return s.ended
}

// SinkEnded reports whether the sink returned false from Deliver: once it
// does, what the sink did is visible to the caller, and nothing more is
// delivered to it.
func (s *Stream) SinkEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// drainToSink hands the stream's queued events to its sink, on the read
// loop: inline marks the call, so Take and Detach wait for it to return.
// A queue the sink may not take (or a stream with no sink, or one whose
// consumer holds what it took) wakes the consumer instead; so does what
// queued during the call (a failure from another goroutine), and the
// sink's end.
func (s *Stream) drainToSink() {
	s.mu.Lock()
	s.dirty = false
	if s.sink == nil || s.taken || len(s.queue) == 0 || !sinkable(s.queue) {
		wake := len(s.queue) > 0
		s.mu.Unlock()
		if wake {
			s.signal()
		}
		return
	}
	q, sink := s.queue, s.sink
	s.queue, s.inline = nil, true
	s.mu.Unlock()
	more := true
	for i := 0; i < len(q) && more; i++ {
		more = sink.Deliver(&q[i])
	}
	s.mu.Lock()
	s.inline = false
	if s.free == nil {
		s.free = q[:0] // the next frames decode into these arrays
	}
	if !more {
		s.sink, s.ended = nil, true
	}
	wake := !more || len(s.queue) > 0
	if s.detaching {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	if wake {
		s.signal()
	}
}
