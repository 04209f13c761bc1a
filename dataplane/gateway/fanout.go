package gateway

import (
	"errors"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
)

// A request for n > 1 choices (OpenAI's n) fans out: each choice is a
// request of its own (its own GENERATE, id <id>-<i>, seed the request's
// plus i, routed on its own), run concurrently, answering through a
// choiceSink. The handler's goroutine alone writes the response: a
// stream's chunks as they come, each choice's with its index, then one
// usage chunk (the prompt once, the completions' tokens summed) and
// [DONE]; a whole response once all are done. A choice that fails, or a
// client that leaves, ends the others.

// errChoiceGone ends a choice whose response is over (another failed, or
// the client left).
var errChoiceGone = errors.New("gateway: the response this choice was for is over")

// choiceEvent is what a choice hands the fan-out. end, err and gone are
// terminal: each choice sends exactly one of them, last.
type choiceEvent struct {
	index  int
	engine string // the serving engine, on the choice's start
	chunk  []byte // bytes of the response (a whole choice with end, when not streaming)
	end    *api.End
	err    *api.Error
	gone   bool
}

// choiceSink is one choice's output: what its encoder renders goes to the
// fan-out as events.
type choiceSink struct {
	index  int
	enc    *api.OpenAIEncoder
	events chan<- choiceEvent
	done   <-chan struct{}
}

func (c *choiceSink) over() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *choiceSink) start(engineID string) error {
	if c.over() {
		return errChoiceGone
	}
	c.events <- choiceEvent{index: c.index, engine: engineID, chunk: c.enc.Open(nil)}
	return nil
}

func (c *choiceSink) delta(p api.Piece) error {
	if c.over() {
		return errChoiceGone
	}
	if b := c.enc.Delta(nil, p); len(b) > 0 {
		c.events <- choiceEvent{index: c.index, chunk: b}
	}
	return nil
}

func (c *choiceSink) finish(e api.End) error {
	c.events <- choiceEvent{index: c.index, chunk: c.enc.Close(nil, e), end: &e}
	return nil
}

func (c *choiceSink) fail(e *api.Error) int {
	c.events <- choiceEvent{index: c.index, err: e}
	return e.Status
}

func (c *choiceSink) gone() int {
	c.events <- choiceEvent{index: c.index, gone: true}
	return 499
}

func (c *choiceSink) goneC() <-chan struct{} { return c.done }

func (c *choiceSink) encoder() api.Encoder { return c.enc }

// choiceOf is req's i-th choice: its own id, seed offset and parser.
func (g *Gateway) choiceOf(req *genRequest, i int) *genRequest {
	return &genRequest{Request: req.Request, id: req.id + "-" + strconv.Itoa(i), tokens: req.tokens, model: req.model,
		parser: outputParser(req.model, req.Request, req.prompt), prompt: req.prompt, choice: i, x: req.x}
}

// fanOut serves req's N choices and returns the HTTP status.
func (g *Gateway) fanOut(w *httpx.ResponseWriter, req *genRequest) int {
	base, ok := g.encoder(req).(*api.OpenAIEncoder)
	if !ok { // only OpenAI's endpoints have n
		return writeError(w, req.Kind.Flavor(), api.BadRequest("n", "n is not a field of this API"))
	}
	events := make(chan choiceEvent, 4*req.N)
	done := make(chan struct{})
	for i := range req.N {
		enc := base.Clone() // base keeps a pooled encoder's room (genpool.go), which the choices must not share
		enc.Index, enc.Part = i, true
		go g.serveOn(g.choiceOf(req, i), &choiceSink{index: i, enc: enc, events: events, done: done})
	}
	f := fan{w: w, base: base, bodies: make([][]byte, req.N)}
	f.collect(events, done, req.N)
	return f.answer()
}

// fan is the state of a fan-out's response.
type fan struct {
	w          *httpx.ResponseWriter
	base       *api.OpenAIEncoder
	headSent   bool
	engines    []string
	usage      api.Usage
	bodies     [][]byte
	failure    *api.Error
	clientGone bool
}

// collect handles the choices' events until each has ended, closing done
// at the first failure or when the client leaves.
func (f *fan) collect(events <-chan choiceEvent, done chan struct{}, n int) {
	closed := false
	stop := func() {
		if !closed {
			close(done)
			closed = true
		}
	}
	gone := f.w.Gone()
	for left := n; left > 0; {
		select {
		case <-gone:
			gone, f.clientGone = nil, true
			stop()
		case ev := <-events:
			switch {
			case ev.gone:
				left--
			case ev.err != nil:
				left--
				if f.failure == nil {
					f.failure = ev.err
				}
				stop()
			default:
				if ev.end != nil {
					left--
					f.ended(ev)
				}
				if ev.engine != "" {
					f.engines = append(f.engines, ev.engine)
				}
				if f.base.Stream && !closed && f.send(ev.chunk) != nil {
					f.clientGone = true
					stop()
				}
			}
		}
	}
}

// ended counts a finished choice's usage and keeps a whole one's body.
func (f *fan) ended(ev choiceEvent) {
	u := ev.end.Usage
	if f.usage.Prompt == 0 {
		f.usage.Prompt, f.usage.Cached = u.Prompt, u.Cached
	}
	f.usage.Completion += u.Completion
	if !f.base.Stream {
		f.bodies[ev.index] = ev.chunk
	}
}

// send writes a stream's chunk, sending the head first.
func (f *fan) send(b []byte) error {
	if !f.headSent {
		f.headSent = true
		f.w.Header().Set("x-kvgate-engine", strings.Join(f.engines, ","))
		f.w.Header().Set("Content-Type", "text/event-stream")
		f.w.Header().Set("Cache-Control", "no-cache")
		if err := f.w.Stream(200); err != nil {
			return err
		}
	}
	if len(b) == 0 {
		return nil
	}
	return f.w.Chunk(b)
}

// answer ends the response once every choice has ended.
func (f *fan) answer() int {
	switch {
	case f.clientGone:
		f.w.Abort()
		return 499
	case f.failure != nil && !f.headSent:
		return writeError(f.w, api.OpenAI, f.failure)
	case f.failure != nil:
		_ = f.w.Chunk(f.base.StreamError(nil, f.failure))
		_ = f.w.Finish()
		return f.failure.Status
	case f.base.Stream:
		if f.send(f.base.EndStream(nil, f.usage)) != nil {
			f.w.Abort()
			return 499
		}
		_ = f.w.Finish()
		return 200
	}
	body, err := api.JoinChoices(f.bodies, f.usage)
	if err != nil {
		return writeError(f.w, api.OpenAI, &api.Error{Status: 500, Message: "joining choices: " + err.Error()})
	}
	f.w.Header().Set("x-kvgate-engine", strings.Join(f.engines, ","))
	_ = finishJSON(f.w, 200, body)
	return 200
}
