package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingWriter counts Write calls and slows each one, so concurrent senders
// pile up behind the flusher as they do on a busy socket.
type countingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  atomic.Int64
	waiting atomic.Int64
	gate    chan struct{}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		w.waiting.Add(1)
		<-w.gate
	}
	w.writes.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestWriterConcurrentOrder: frames from concurrent senders all arrive whole,
// each stream's frames in the order they were sent.
func TestWriterConcurrentOrder(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	const senders, each = 8, 200
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := &TokensMsg{Tokens: TokensOf([]uint32{uint32(s), uint32(i)})}
				if err := w.Send(uint32(s+1), m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(cw.buf.Bytes()), nil)
	next := make(map[uint32]uint32)
	frames := 0
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var m TokensMsg
		if err := DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		if m.Tokens.At(1) != next[f.Stream] {
			t.Fatalf("stream %d: frame %d out of order (want %d)", f.Stream, m.Tokens.At(1), next[f.Stream])
		}
		next[f.Stream]++
		frames++
	}
	if frames != senders*each {
		t.Fatalf("got %d frames, want %d", frames, senders*each)
	}
}

// writeHeld returns a Writer whose first Send (a PING carrying data) is
// inside Write, held until cw.gate closes; first gets that Send's result.
func writeHeld(t testing.TB, data uint64) (cw *countingWriter, w *Writer, first chan error) {
	t.Helper()
	cw = &countingWriter{gate: make(chan struct{})}
	w = NewWriter(cw)
	first = make(chan error)
	go func() { first <- w.Send(1, &Ping{Data: data}) }()
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if cw.waiting.Load() == 0 {
			return errors.New("the first Send has not reached Write")
		}
		return nil
	})
	return cw, w, first
}

// TestWriterBatchesBehindAWrite: while one write is in progress, every frame
// sent meanwhile leaves in the next single write.
func TestWriterBatchesBehindAWrite(t *testing.T) {
	cw, w, first := writeHeld(t, 0)
	const n = 1000
	for i := 1; i <= n; i++ {
		if err := w.Send(1, &Ping{Data: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(cw.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := cw.writes.Load(); got != 2 {
		t.Fatalf("%d frames took %d writes, want 2", n+1, got)
	}
	if want := (n + 1) * (HeaderSize + 8); cw.buf.Len() != want {
		t.Fatalf("wrote %d bytes, want %d", cw.buf.Len(), want)
	}
}

func (w *Writer) pendingLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriterStickyErrorAndClose(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.Send(0, &Ping{}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("got %v", err)
	}
	if err := w.Send(0, &Ping{}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("sticky: got %v", err)
	}
	w2 := NewWriter(io.Discard)
	w2.Close()
	if err := w2.Send(0, &Ping{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v", err)
	}
}

// TestWriterBackpressure: with a writer that never returns, senders stop at
// MaxPending instead of buffering without bound, and Close releases them.
func TestWriterBackpressure(t *testing.T) {
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	w := NewWriter(writerFunc(func(p []byte) (int, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
		return len(p), nil
	}))
	w.maxPending = 1 << 10
	go func() { _ = w.Send(0, &Ping{}) }() // becomes the stuck flusher
	// The senders start once it is stuck in its write: had they filled
	// pending first, its flush would take the whole bound into that write
	// and leave them waiting on an empty pending until it ends.
	<-entered
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := w.Queue(0, &Ping{}); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if n := w.pendingLen(); n < w.maxPending {
			return fmt.Errorf("%d bytes pending, the senders have not reached the bound %d", n, w.maxPending)
		}
		return nil
	})
	w.Close()
	<-done
	close(block)
	if got := w.pendingLen(); got > w.maxPending+64 {
		t.Fatalf("pending grew to %d, bound %d", got, w.maxPending)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWriterSync: a frame queued while another goroutine is writing is on
// the wire when Sync returns; Flush would have left it to that goroutine.
func TestWriterSync(t *testing.T) {
	cw, w, first := writeHeld(t, 1)
	if err := w.Send(2, &Goaway{Code: CodeShutdown}); err != nil { // queued behind it
		t.Fatal(err)
	}
	synced := make(chan error)
	go func() { synced <- w.Sync() }()
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while the first write was still held", err)
	default:
	}
	close(cw.gate)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	cw.mu.Lock()
	n := cw.buf.Len()
	cw.mu.Unlock()
	if want := (HeaderSize + 8) + len(frameOf(&Goaway{Code: CodeShutdown})); n != want {
		t.Fatalf("%d bytes written when Sync returned, want %d (the GOAWAY too)", n, want)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// frameOf is a frame of m on stream 2, for size checks.
func frameOf(m Message) []byte {
	b, err := AppendFrame(nil, 2, m)
	if err != nil {
		panic(err)
	}
	return b
}
