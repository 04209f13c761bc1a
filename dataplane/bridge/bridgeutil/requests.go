package bridgeutil

import (
	"context"
	"sync"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Requests is an adapter's table of running requests: the cancel function
// of each request's HTTP call, by the router's key, so CANCEL and Shutdown
// reach it. Its own mutex guards it; the zero value is ready.
type Requests struct {
	mu   sync.Mutex
	reqs map[serve.Key]context.CancelFunc
}

// Start records a request and returns the context its HTTP call runs
// under; Cancel(k) or Done(k) ends it.
func (r *Requests) Start(k serve.Key) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	if r.reqs == nil {
		r.reqs = map[serve.Key]context.CancelFunc{}
	}
	r.reqs[k] = cancel
	r.mu.Unlock()
	return ctx
}

// Cancel aborts k's HTTP call; the request stays in the table until Done.
func (r *Requests) Cancel(k serve.Key) {
	r.mu.Lock()
	cancel := r.reqs[k]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Done releases k's context and forgets it.
func (r *Requests) Done(k serve.Key) {
	r.mu.Lock()
	if cancel := r.reqs[k]; cancel != nil {
		cancel()
	}
	delete(r.reqs, k)
	r.mu.Unlock()
}

// Idle reports whether no request is running.
func (r *Requests) Idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs) == 0
}

// Broken ends a stream whose HTTP call broke: with a last TOKENS frame
// saying cancelled when ctx, the request's, was cancelled (the router sent
// CANCEL or went away), else with a stream ERROR.
func Broken(out *serve.Server, ctx context.Context, k serve.Key, code wire.ErrorCode, msg string) {
	if ctx.Err() != nil {
		out.Deliver([]serve.Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishCancelled}}})
		return
	}
	out.Fail(k, code, msg)
}

// Unreachable ends a stream whose HTTP call to the engine failed before any
// response came back (the engine refused the connection, died, or broke it
// before its status line): nothing was generated, so the stream ends with
// OVERLOADED, which routers re-route to another engine before the client
// sees anything. A cancelled request ends as Broken does.
func Unreachable(out *serve.Server, ctx context.Context, k serve.Key, engine string, err error) {
	Broken(out, ctx, k, wire.CodeOverloaded, engine+" unreachable: "+err.Error())
}
