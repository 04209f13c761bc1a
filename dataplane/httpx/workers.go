package httpx

import (
	"sync"
	"sync/atomic"
)

// Handler goroutines are kept and reused: a request handed to an idle one
// runs on a stack already grown by earlier requests, where a new goroutine
// would start at 2 KB and copy its stack as it grows through JSON decoding
// and encoding (12% of kvgate's CPU under proxyratio.sh before this).
// There is at most one request in service per connection, so MaxConns
// bounds them. At most maxIdleWorkers wait for work (a burst of streams
// leaves no more behind than that), one idle for workerIdle ticks ends,
// and Shutdown ends the rest.
//
// Idle workers wait on a stack, each on a channel of its own: the
// hand-off is one pop under workers.mu and one send into a buffered
// channel the worker blocks on alone, and the worker most recently idle
// (its stack and caches warm) goes first. An idle worker's age is counted
// in OnTick's ticks, so a request costs no timer.

const (
	// workerIdle is how many of OnTick's ticks (seconds) a handler
	// goroutine waits for another request.
	workerIdle = 10
	// maxIdleWorkers bounds the handler goroutines waiting for work.
	maxIdleWorkers = 256
)

type task struct {
	w *ResponseWriter
	r *Request
}

// worker is one handler goroutine's mailbox.
type worker struct {
	tasks  chan task // buffer 1: a hand-off never blocks; a zero task ends the worker
	idleAt int64     // the tick it went idle at, under workers.mu
}

// workers hands requests to idle handler goroutines.
type workers struct {
	mu      sync.Mutex
	idle    []*worker // LIFO: idle[len-1] went idle last
	stopped bool
	ticks   atomic.Int64
	wg      sync.WaitGroup
}

func newWorkers() *workers { return &workers{} }

// dispatch serves the request on an idle worker, or on a new one.
func (s *Server) dispatch(w *ResponseWriter, r *Request) {
	wk := s.workers
	wk.mu.Lock()
	var idle *worker
	if n := len(wk.idle); n > 0 {
		idle = wk.idle[n-1]
		wk.idle[n-1] = nil
		wk.idle = wk.idle[:n-1]
	}
	wk.mu.Unlock()
	if idle != nil {
		idle.tasks <- task{w, r}
		return
	}
	wk.wg.Add(1)
	go s.work(&worker{tasks: make(chan task, 1)}, task{w, r})
}

func (s *Server) work(me *worker, t task) {
	wk := s.workers
	defer wk.wg.Done()
	for t.w != nil {
		s.serve(t.w, t.r)
		if !wk.park(me) {
			return
		}
		t = <-me.tasks
	}
}

// park lists me as idle, or reports that it should end instead.
func (wk *workers) park(me *worker) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.stopped || len(wk.idle) >= maxIdleWorkers {
		return false
	}
	me.idleAt = wk.ticks.Load()
	wk.idle = append(wk.idle, me)
	return true
}

// tick counts one of OnTick's ticks and ends the workers idle for
// workerIdle of them (the oldest are at the bottom of the stack).
func (wk *workers) tick() {
	now := wk.ticks.Add(1)
	wk.mu.Lock()
	defer wk.mu.Unlock()
	old := 0
	for old < len(wk.idle) && now-wk.idle[old].idleAt >= workerIdle {
		wk.idle[old].tasks <- task{}
		old++
	}
	if old > 0 {
		n := copy(wk.idle, wk.idle[old:])
		clear(wk.idle[n:])
		wk.idle = wk.idle[:n]
	}
}

// stop ends idle workers, and the others when their request ends; it
// waits for them until deadline.
func (wk *workers) stop(deadline <-chan struct{}) {
	wk.mu.Lock()
	wk.stopped = true
	for i, w := range wk.idle {
		w.tasks <- task{}
		wk.idle[i] = nil
	}
	wk.idle = nil
	wk.mu.Unlock()
	done := make(chan struct{})
	go func() { wk.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline:
	}
}
