package wire

import (
	"bytes"
	"sync"
	"testing"
)

// slowSink records every write and holds each until release is told,
// so senders queue frames while a write is under way.
type slowSink struct {
	mu      sync.Mutex
	got     bytes.Buffer
	entered chan struct{}
	release chan struct{}
}

func (s *slowSink) Write(p []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	s.got.Write(p)
	s.mu.Unlock()
	return len(p), nil
}

// TestWriterLargeBurstKeepsFrames: a write of more than spareKeep bytes
// is not kept for reuse; the frames queued meanwhile must still reach the
// wire whole and in order (the spare buffer once named the array being
// written, and later frames were appended into it under the write).
func TestWriterLargeBurstKeepsFrames(t *testing.T) {
	sink := &slowSink{entered: make(chan struct{}), release: make(chan struct{})}
	w := NewWriter(sink)
	payload := make([]byte, 4096)
	frame := func(i int) *Error {
		for j := range payload {
			payload[j] = 'a' + byte((i+j)%26)
		}
		return &Error{Code: CodeBadRequest, Message: string(payload)}
	}
	var want []byte
	queue := func(from, to int) {
		for i := from; i < to; i++ {
			m := frame(i)
			if err := w.Queue(uint32(i), m); err != nil {
				t.Fatal(err)
			}
			want, _ = AppendFrame(want, uint32(i), m)
		}
	}
	small, large := 4, spareKeep/4096+8 // a write under spareKeep, then one over it
	queue(0, small)
	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush() }()
	<-sink.entered // writing the small batch
	queue(small, small+large)
	sink.release <- struct{}{}
	<-sink.entered // writing the large batch: its array is pending's no more
	queue(small+large, small+large+small)
	sink.release <- struct{}{}
	<-sink.entered // writing that small batch while more are queued
	queue(small+large+small, small+large+2*small)
	sink.release <- struct{}{}
	<-sink.entered
	sink.release <- struct{}{}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.got.Bytes(), want) {
		t.Fatalf("the wire got %d bytes that differ from the %d queued", sink.got.Len(), len(want))
	}
}
