package httpx

import (
	"sync"
	"sync/atomic"
	"time"
)

// Handler goroutines are kept and reused: a request handed to an idle one
// runs on a stack already grown by earlier requests, where a new goroutine
// would start at 2 KB and copy its stack as it grows through JSON decoding
// and encoding (12% of kvgate's CPU under proxyratio.sh before this).
// There is at most one request in service per connection, so MaxConns
// bounds them. At most maxIdleWorkers wait for work (a burst of streams
// leaves no more behind than that), one idle for workerIdle ends, and
// Shutdown ends the rest.

const (
	// workerIdle is how long a handler goroutine waits for another request.
	workerIdle = 10 * time.Second
	// maxIdleWorkers bounds the handler goroutines waiting for work.
	maxIdleWorkers = 256
)

type task struct {
	w *ResponseWriter
	r *Request
}

// workers hands requests to idle handler goroutines.
type workers struct {
	tasks chan task // unbuffered: a send succeeds only into an idle worker
	idle  atomic.Int32
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newWorkers() *workers { return &workers{tasks: make(chan task), quit: make(chan struct{})} }

// dispatch serves the request on an idle worker, or on a new one.
func (s *Server) dispatch(w *ResponseWriter, r *Request) {
	select {
	case s.workers.tasks <- task{w, r}:
	default:
		s.workers.wg.Add(1)
		go s.work(task{w, r})
	}
}

func (s *Server) work(t task) {
	defer s.workers.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		s.serve(t.w, t.r)
		t = task{}
		if s.workers.idle.Add(1) > maxIdleWorkers {
			s.workers.idle.Add(-1)
			return
		}
		idle.Reset(workerIdle)
		select {
		case t = <-s.workers.tasks:
			s.workers.idle.Add(-1)
		case <-idle.C:
			s.workers.idle.Add(-1)
			return
		case <-s.workers.quit:
			s.workers.idle.Add(-1)
			return
		}
	}
}

// stop ends idle workers, and the others when their request ends; it
// waits for them until deadline.
func (wk *workers) stop(deadline <-chan struct{}) {
	wk.once.Do(func() { close(wk.quit) })
	done := make(chan struct{})
	go func() { wk.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline:
	}
}
