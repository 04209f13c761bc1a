package gateway

import (
	"strings"
	"unsafe"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
)

// sink is where an attempt's output goes: the client's response (output)
// or one choice of several (choiceSink).
type sink interface {
	start(engineID string) error
	delta(p api.Piece) error
	finish(e api.End) error
	fail(e *api.Error) int
	gone() int
	// goneC is closed when the output has no one to go to any more.
	goneC() <-chan struct{}
	encoder() api.Encoder
}

// output sends what an API's encoder renders on the client's HTTP
// response: the head once the first token arrives (naming the engine),
// then the stream's events, or the whole body at the end. A failure before
// the head is an ordinary error response; after it, an in-stream error.
type output struct {
	w       *httpx.ResponseWriter
	enc     api.Encoder
	flavor  api.Flavor
	started bool
	buf     []byte // reused: Chunk copies what it sends
	body    []byte // a whole body's, kept with a pooled request (genpool.go)
}

func (o *output) goneC() <-chan struct{} { return o.w.Gone() }

func (o *output) encoder() api.Encoder { return o.enc }

// start sends a stream's head and opening events; engineID names the
// serving engine in x-kvgate-engine.
func (o *output) start(engineID string) error {
	o.started = true
	o.w.Header().Set("x-kvgate-engine", engineID)
	if !o.enc.Streaming() {
		return nil
	}
	o.w.Header().Set("Content-Type", "text/event-stream")
	o.w.Header().Set("Cache-Control", "no-cache")
	if err := o.w.Stream(200); err != nil {
		return err
	}
	return o.chunk(o.enc.Open(o.buf[:0]))
}

func (o *output) chunk(b []byte) error {
	o.buf = b
	return o.w.Chunk(b)
}

// delta sends (or, for a whole response, keeps) a piece of output.
func (o *output) delta(p api.Piece) error {
	b := o.enc.Delta(o.buf[:0], p)
	if len(b) == 0 {
		return nil
	}
	return o.chunk(b)
}

// finish ends the response.
func (o *output) finish(e api.End) error {
	if !o.enc.Streaming() {
		// The writer copies the body once, after the head: its buffer is
		// reused by the next request that takes this one's genRequest (a
		// body built from nil grew 4-5 times, 12% of the bytes a 1-token
		// completion allocated under wrk).
		o.body = o.enc.Close(o.body[:0], e)
		return finishJSON(o.w, 200, o.body)
	}
	if err := o.chunk(o.enc.Close(o.buf[:0], e)); err != nil {
		return err
	}
	return o.w.Finish()
}

// fail ends the response with e and returns its status.
func (o *output) fail(e *api.Error) int {
	if !o.started || !o.enc.Streaming() {
		return writeError(o.w, o.flavor, e)
	}
	_ = o.chunk(o.enc.StreamError(o.buf[:0], e))
	_ = o.w.Finish()
	return e.Status
}

// gone ends the response of a client that left (or was cut off): the
// request is over, nothing more can reach it. It returns 499, nginx's
// status for a client that closed the request.
func (o *output) gone() int {
	o.w.Abort()
	return 499
}

// stopByToken is outputText for an event of several tokens and stop
// strings to match: it detokenizes and matches token by token from free
// (a.buf holds the exempt text of the tokens before it), so a stop string
// ends the output at the token that completed it however the engine
// batched its tokens (wire.FeatureTokenBatch) or the stream merged its
// frames: usage and logprobs count that token and none after it, as one
// token a frame would.
func (a *attempt) stopByToken(ev engine.Event, toks []uint32, free, exempt int) (text string, used int, stopped bool) {
	var out strings.Builder
	out.Write(a.buf[:exempt])
	for i := free; i < len(toks); i++ {
		start := len(a.buf)
		a.buf = a.detok.Next(a.buf, toks[i:i+1])
		last := ev.Last && i == len(toks)-1
		if last {
			a.buf = a.detok.Flush(a.buf)
		}
		piece, st := a.stops.Feed(string(a.buf[start:]), last)
		out.WriteString(piece)
		if st {
			return out.String(), i + 1, true
		}
	}
	return out.String(), len(ev.Tokens), false
}

// textOf is b as the text of this event's output. Where nothing keeps the
// text past the event (no reasoning or tool parser, no stop strings: the
// encoder copies it into its chunk, a whole response into its body) it is
// b itself, no copy: a.buf is reused only by the next event. Otherwise a
// copy, as a parser may hold back part of it.
func (a *attempt) textOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if a.req.parser.Reasoning == nil && a.req.parser.Tools == nil && !a.stops.Active() {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}
