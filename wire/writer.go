package wire

import (
	"fmt"
	"io"
	"sync"
)

// Writer writes frames with batching. Send appends a frame to a pending buffer;
// the first sender that finds no write in progress becomes the flusher and
// writes everything pending in one call, while later senders only append, so
// many small frames from concurrent streams leave in one syscall. Queue
// appends without writing, for a caller that emits a burst and then Flushes.
//
// Pending bytes are bounded by MaxPending: a sender that would exceed it waits
// for the flusher (back-pressure), it is never buffered without bound.
type Writer struct {
	w          io.Writer
	maxPending int

	mu       sync.Mutex
	cond     sync.Cond
	pending  []byte
	spare    []byte
	flushing bool
	err      error // sticky: the first write error, or ErrClosed
	scratch  []byte
	codec    Codec
}

// DefaultMaxPending bounds a Writer's pending bytes.
const DefaultMaxPending = 32 << 20

// spareKeep is the largest buffer a Writer keeps for reuse after a write.
const spareKeep = 1 << 20

// NewWriter returns a Writer over w with DefaultMaxPending.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{w: w, maxPending: DefaultMaxPending}
	wr.cond.L = &wr.mu
	return wr
}

// SetCodec sets the codec used for compressible frames (KV_EVENTS, SNAPSHOT).
// Use only a codec the peer announced in its handshake features.
func (w *Writer) SetCodec(c Codec) {
	w.mu.Lock()
	w.codec = c
	w.mu.Unlock()
}

// Send appends m as a frame on stream and writes it, unless another goroutine
// is already writing, in which case that goroutine will write it.
func (w *Writer) Send(stream uint32, m Message) error {
	if err := w.Queue(stream, m); err != nil {
		return err
	}
	return w.Flush()
}

// Queue appends m as a frame without writing it.
func (w *Writer) Queue(stream uint32, m Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && len(w.pending) >= w.maxPending {
		w.cond.Wait()
	}
	if w.err != nil {
		return w.err
	}
	var err error
	if w.codec != CodecNone && m.Type().Compressible() {
		w.pending, err = AppendFrameCompressed(w.pending, stream, m, w.codec, &w.scratch)
	} else {
		w.pending, err = AppendFrame(w.pending, stream, m)
	}
	return err
}

// Flush writes pending frames, unless a write is in progress (its writer will
// take them). It returns the sticky write error, if any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flushing {
		return w.err
	}
	w.flushing = true
	for w.err == nil && len(w.pending) > 0 {
		buf := w.pending
		// spare is pending's array now: forget it, or a buffer too large
		// to keep (below) would leave spare naming the array that the
		// next round writes while senders append to it.
		w.pending, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		_, err := w.w.Write(buf)
		w.mu.Lock()
		if cap(buf) <= spareKeep {
			w.spare = buf[:0] // reuse; a burst's large buffer is left to the GC
		}
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("writing frames: %w", err)
		}
		w.cond.Broadcast()
	}
	w.flushing = false
	w.cond.Broadcast()
	return w.err
}

// Sync writes every frame pending when it is called before it returns,
// waiting for a write another goroutine has in progress (Flush leaves the
// pending frames to that goroutine and returns at once). Call it before
// closing the connection under frames that must arrive, such as a GOAWAY;
// set a write deadline first if the peer may not be reading.
func (w *Writer) Sync() error {
	w.mu.Lock()
	for w.flushing && w.err == nil {
		w.cond.Wait()
	}
	w.mu.Unlock()
	return w.Flush()
}

// Err returns the sticky error: the first write failure, or ErrClosed;
// nil while frames can still be sent. A message that fails to encode is
// refused by its Send alone and leaves no sticky error.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close makes every later Send fail with ErrClosed and wakes blocked senders.
// It does not close the underlying writer.
func (w *Writer) Close() {
	w.mu.Lock()
	if w.err == nil {
		w.err = ErrClosed
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}
