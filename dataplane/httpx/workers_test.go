package httpx

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// idleWorkers is how many handler goroutines wait for work.
func (wk *workers) idleWorkers() int {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return len(wk.idle)
}

// TestWorkersIdleEnd: handler goroutines that served requests wait for
// more and are reused, the one idle last first, with no new goroutine per
// request; they end once workerIdle ticks pass without work, and at stop.
// The server is not run: requests are dispatched by hand and only the
// test ticks.
func TestWorkersIdleEnd(t *testing.T) {
	const n = 5
	var started sync.WaitGroup
	release := make(chan struct{})
	var served atomic.Int64
	s := NewServer(DefaultConfig(), handlerFunc(func(w *ResponseWriter, r *Request) {
		w.finished = true // no connection behind it
		served.Add(1)
		if r.Path == "/hold" {
			started.Done()
			<-release
		}
	}))
	dispatch := func(path string) { s.dispatch(&ResponseWriter{}, &Request{Path: path}) }
	started.Add(n)
	for range n {
		dispatch("/hold")
	}
	started.Wait()
	close(release)
	checkFor(t, 30*time.Second, func() bool { return s.workers.idleWorkers() == n })
	last := s.workers.idle[n-1]
	for i := range 3 * n { // one at a time: the idle ones serve them all
		dispatch("/")
		checkFor(t, 30*time.Second, func() bool { return served.Load() == int64(n+i+1) && s.workers.idleWorkers() == n })
	}
	if s.workers.idle[n-1] != last {
		t.Error("the worker idle last did not serve the next request")
	}
	for range workerIdle - 1 {
		s.workers.tick()
	}
	if got := s.workers.idleWorkers(); got != n {
		t.Fatalf("%d idle workers after %d ticks, want %d", got, workerIdle-1, n)
	}
	dispatch("/") // the worker it takes is idle from this tick on
	checkFor(t, 30*time.Second, func() bool { return served.Load() == int64(4*n+1) && s.workers.idleWorkers() == n })
	s.workers.tick()
	if got := s.workers.idleWorkers(); got != 1 {
		t.Fatalf("%d idle workers after %d ticks, want the one that served since", got, workerIdle)
	}
	done := make(chan struct{})
	s.workers.stop(done)
	if got := s.workers.idleWorkers(); got != 0 {
		t.Fatalf("%d idle workers after stop", got)
	}
	ended := make(chan struct{})
	go func() { s.workers.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("idle workers did not end")
	}
}

// BenchmarkDispatch: one request handed to an idle handler goroutine and
// its end seen back, the hand-off's round trip without a connection.
func BenchmarkDispatch(b *testing.B) {
	done := make(chan struct{}, 1)
	s := NewServer(DefaultConfig(), handlerFunc(func(w *ResponseWriter, r *Request) {
		w.finished = true // no connection behind it
		done <- struct{}{}
	}))
	b.ReportAllocs()
	w, r := &ResponseWriter{}, &Request{}
	for b.Loop() {
		s.dispatch(w, r)
		<-done
	}
	s.workers.stop(nil)
}
