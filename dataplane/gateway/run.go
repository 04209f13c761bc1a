package gateway

import (
	"errors"
	"sync"
	"time"
	"unsafe"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// genRequest is a decoded request with its id and prompt tokens.
type genRequest struct {
	*api.Request
	id     string
	tokens []uint32
	// model is the served model: its tokenizer and parsers (model.go).
	model *Model
	// parser splits a chat's output into text, reasoning and tool calls.
	parser *api.OutputParser
	// prompt is the rendered prompt text, from which a choice's own parser
	// starts (fanout.go).
	prompt string
	// choice is this request's choice index among N (fanout.go): its seed
	// is the request's plus choice.
	choice int
	// x observes the request (access line, spans: accesslog.go); nil
	// when nothing does.
	x *exchange
	// The request's GENERATE, routing request and client output, filled
	// in by generate, serveOn and run, and its OpenAI encoder (encoder)
	// and prompt ids' room (promptTokens): held here, they come in the
	// request's one object, which genRequests keeps with its buffers.
	gen wire.Generate
	rr  route.Request
	out output
	oai api.OpenAIEncoder
	ids []uint32
	// respID is the room of the response's id (responseID).
	respID []byte
}

// generate is the GENERATE frame of req, without an engine's model or
// adapter (stream sets those).
func (req *genRequest) generate() *wire.Generate {
	gen := &req.gen
	*gen = wire.Generate{RequestID: readOnlyBytes(req.id), MaxTokens: req.MaxTokens,
		Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, DPRank: wire.AnyRank,
		StopTokens: wire.TokensOf(req.StopTokenIDs), Prompt: wire.TokensOf(req.tokens), Guided: req.Guided}
	if req.Seed != nil {
		gen.Seed, gen.Flags = *req.Seed+uint64(req.choice), gen.Flags|wire.GenHasSeed
	}
	if req.IgnoreEOS {
		gen.Flags |= wire.GenIgnoreEOS
	}
	req.addSampling(gen)
	req.addMedia(gen) // media_send.go
	return gen
}

// readOnlyBytes is s's bytes without a copy, for a frame field that is
// only encoded (GENERATE's request_id): nothing may write to them.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// run routes req, streams its tokens through out, and returns the HTTP
// status. An engine that fails before the first token costs the client
// nothing: the request is routed again, up to g.Retries times.
func (g *Gateway) run(w *httpx.ResponseWriter, req *genRequest, enc api.Encoder) int {
	req.out = output{w: w, enc: enc, flavor: req.Kind.Flavor(), body: req.out.body[:0]}
	return g.serveOn(req, &req.out)
}

// serveOn is run's routing and retries, answering through out: the client's
// response, or one choice of several (fanout.go).
func (g *Gateway) serveOn(req *genRequest, out sink) int {
	gen := req.generate()
	var lastErr error
	rr := &req.rr
	*rr = route.Request{Model: req.Model, Tokens: req.tokens, Session: req.User}
	if req.Guided != nil {
		rr.Needs = wire.FeatureGuided
	}
	if req.needsSampling() {
		rr.Needs |= wire.FeatureSampling
	}
	// media_send.go: the images' keys, and engines that take images
	req.routeMedia(rr)
	_, rr.Split = out.(*output)       // one client stream: a split's two engines can serve it (disagg.go)
	rr.MaxTokens = int(gen.MaxTokens) // the split rule's output bound (route/disagg_slo.go)
	for attempt := 0; attempt <= g.Retries; attempt++ {
		t0 := time.Now()
		d, err := g.Router.Route(rr)
		g.Metrics.observeRoute(time.Since(t0))
		req.x.routed(t0, d, err)
		if err != nil {
			return req.fail(out, g.routeFailure(err, req))
		}
		g.observeDisagg(rr, d) // disagg.go
		status, retry, err := g.attempt(req, gen, d, out)
		if !retry {
			return status
		}
		lastErr = err
		rr.Exclude = append(rr.Exclude, d.Engine)
		if d.Prefill != nil {
			rr.Exclude = append(rr.Exclude, d.Prefill.Engine)
		}
		g.Log.Warn("re-routing before first token", "request", req.id, "engine", d.Engine.Addr, "err", err)
	}
	return req.fail(out, &api.Error{Status: 502, Message: "engines failed before the first token: " + errString(lastErr)})
}

// fail ends req's response through out with e, and records e as the
// request's error.
func (req *genRequest) fail(out sink, e *api.Error) int {
	req.x.failed(e)
	return out.fail(e)
}

// routeError is the client's answer when no engine could be chosen.
func routeError(err error, req *genRequest) *api.Error {
	switch {
	case errors.Is(err, route.ErrNoEngine) && req.needsSampling():
		return api.BadRequest(req.Extras.Field, req.Extras.Field+" is not supported by any ready engine of model "+req.Model+
			" (it needs an engine announcing the wire protocol's SAMPLING feature)")
	case errors.Is(err, route.ErrNoEngine) && req.Guided != nil:
		return api.BadRequest("response_format", "structured output (response_format or a forced tool_choice) is not supported by any ready engine of model "+req.Model)
	case errors.Is(err, route.ErrNoEngine):
		return &api.Error{Status: 503, Message: "no engine is ready for model " + req.Model, RetryAfter: 1}
	case errors.Is(err, route.ErrQueueFull):
		return &api.Error{Status: 429, Type: "rate_limit_error", Message: "every engine for model " + req.Model + " is at its queue limit", RetryAfter: 1}
	}
	return &api.Error{Status: 500, Message: err.Error()}
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// attempt is the state of one attempt at streaming a request from an engine.
type attempt struct {
	g       *Gateway
	req     *genRequest
	d       *route.Decision
	s       *engine.Stream
	out     sink
	detok   *tokenize.Stream
	stops   *api.StopMatcher
	sent    time.Time
	started bool
	usage   api.Usage
	// generated counts the tokens received, the completion tokens of an
	// output a stop string ended (the engine's count never comes).
	generated int
	buf       []byte
	pieces    []api.Piece
	whole     []byte // a whole response's text, parsed at its end
	obs       *attemptObs
	// attached: the engine's read loop hands the stream's plain events to
	// Deliver; status is the response's once Deliver ended it.
	attached bool
	status   int
}

// completion is the attempt's completion tokens: the engine's count when
// it sent one, else the tokens received.
func (a *attempt) completion() int {
	if a.usage.Completion > 0 {
		return int(a.usage.Completion)
	}
	return a.generated
}

// attempt runs one attempt on the decided engine and releases its
// reservation however the attempt ends (a panic included).
func (g *Gateway) attempt(req *genRequest, gen *wire.Generate, d *route.Decision, out sink) (status int, retry bool, err error) {
	if d.Prefill != nil {
		return g.attemptSplit(req, gen, d, out) // disagg.go
	}
	defer d.Done() // idempotent: a finished stream released it already
	base, lora, ok := d.Engine.ResolveWire(req.Model)
	if !ok {
		return 0, true, engine.ErrNotReady
	}
	gen.Model, gen.LoRAID, gen.DPRank = base, lora, d.WireRank() // the rank the router chose (any rank for one-rank engines)
	// trace.go: the engine span, and the trace section of gen
	obs := req.x.startAttempt(gen, d)
	s, err := d.Engine.Generate(gen)
	if err != nil {
		obs.end(0, retryable(err), err, 0)
		if retryable(err) {
			return 0, true, err
		}
		return req.fail(out, engineError(err)), false, nil // refused before sending: the request's own fault
	}
	defer func() {
		if p := recover(); p != nil {
			s.Cancel(wire.CancelClientGone) // the engine stops; ServeHTTP answers
			panic(p)
		}
	}()
	return g.stream(req, d, s, out, obs)
}

// stream follows one engine stream to its end. retry is true when nothing
// reached the client and another engine may serve the request. A client
// that leaves ends the stream and aborts its response (499). Once the
// first token is out, a client's stream takes its plain events on the
// engine's read loop (attempt.Deliver): this goroutine then waits only
// for the end, an error, or the client leaving.
func (g *Gateway) stream(req *genRequest, d *route.Decision, s *engine.Stream, out sink, obs *attemptObs) (status int, retry bool, err error) {
	a := g.newAttempt(req, d, s, out, obs)
	deadline, tick := a.sent.Add(g.FirstTokenTimeout), tickOf(g.FirstTokenTimeout)
	defer func() {
		if a.attached {
			s.Detach() // before a's state is read or pooled: no delivery is under way after it
		}
		obs.end(status, retry, err, a.completion())
		putAttempt(a)
	}()
	for {
		var firstToken <-chan struct{} // a nil channel's case is left out: a wait per event locks two channels, not three
		if !a.started {
			firstToken = g.firstToken.next(tick) // alarm.go: the shared clock, not a timer a request
		}
		select {
		case <-s.Ready():
		case <-out.goneC():
			if a.attached && s.Detach() {
				return a.status, false, nil // the read loop's delivery ended the request first
			}
			s.Cancel(wire.CancelClientGone)
			return out.gone(), false, nil
		case <-firstToken:
			if time.Now().Before(deadline) {
				continue // a tick before the deadline
			}
			s.Cancel(wire.CancelTimeout)
			return req.fail(out, &api.Error{Status: 504, Message: "no first token from the engine in time"}), false, nil
		}
		if a.attached && s.SinkEnded() {
			return a.status, false, nil
		}
		evs := s.Take()
		for _, ev := range evs {
			if status, retry, err, done := g.handle(a, ev); done {
				return status, retry, err
			}
		}
		if a.started && !a.attached && a.inline() {
			s.Attach(a) // from the next frame on: these events are handled first (Release)
			a.attached = true
		}
		s.Release(evs) // handled: their arrays take the next frames
	}
}

// inline reports whether the attempt's plain events may be handled on the
// engine's read loop: one client's response (a choice of several, fanout.go,
// shares its writer), and no tool parser on a stream, which can hold a
// call's text back and send it at once, too large a write for the read loop
// to make.
func (a *attempt) inline() bool {
	_, one := a.out.(*output)
	return one && (!a.req.Stream || a.req.parser.Tools == nil)
}

// Deliver implements engine.Sink: it handles a plain event on the engine's
// read loop, as stream would; false once the request is over (a stop
// string, or the client gone), with its status in a.status.
func (a *attempt) Deliver(ev *engine.Event) bool {
	status, _, _, done := a.g.handle(a, *ev)
	a.status = status
	return !done
}

// newAttempt is the state of streaming s to out.
func (g *Gateway) newAttempt(req *genRequest, d *route.Decision, s *engine.Stream, out sink, obs *attemptObs) *attempt {
	// With tools, special tokens are text (vLLM's chat endpoint sets
	// skip_special_tokens false then): some models' call markers are.
	keepSpecial := req.parser.Tools != nil
	a := attempts.Get().(*attempt)
	detok := a.detok
	if detok == nil {
		detok = req.model.Tok.NewStream(!keepSpecial)
	} else {
		detok.Reset(req.model.Tok, !keepSpecial)
	}
	*a = attempt{g: g, req: req, d: d, s: s, out: out, detok: detok, stops: api.NewStopMatcher(req.Stop),
		sent: time.Now(), obs: obs, buf: a.buf[:0], pieces: a.pieces[:0], whole: a.whole[:0]}
	return a
}

// attempts holds the attempts stream is done with, their buffers kept;
// disagg.go's, which outlive a stream, are not put back.
var attempts = sync.Pool{New: func() any { return new(attempt) }}

// putAttempt gives a back to attempts once nothing refers to it: its
// references are dropped, its buffers (of a bounded size) kept. Text
// handed out of a.buf (textOf) is copied by the encoder before the event
// that made it is over, so no response still reads it.
func putAttempt(a *attempt) {
	if cap(a.buf) > 64<<10 || cap(a.whole) > 64<<10 || cap(a.pieces) > 256 {
		return
	}
	if a.detok != nil && a.detok.Held() > 64<<10 {
		a.detok = nil
	}
	*a = attempt{buf: a.buf[:0], pieces: clear0(a.pieces), whole: a.whole[:0], detok: a.detok}
	attempts.Put(a)
}

// clear0 is p emptied, its pieces' references dropped.
func clear0(p []api.Piece) []api.Piece {
	clear(p[:cap(p)])
	return p[:0]
}

// handle applies one stream event; done says the attempt is over.
func (g *Gateway) handle(a *attempt, ev engine.Event) (status int, retry bool, err error, done bool) {
	if ev.Err != nil {
		if !a.started {
			if retryable(ev.Err) {
				return 0, true, ev.Err, true
			}
			return a.req.fail(a.out, engineError(ev.Err)), false, nil, true
		}
		a.d.Done() // as at any end: released before the client can see the end of its response
		return a.req.fail(a.out, &api.Error{Status: 502, Message: "engine failed mid-stream: " + ev.Err.Error()}), false, nil, true
	}
	if ev.First {
		a.started = true
		a.d.FirstToken()
		a.usage.Cached = ev.Cached
		a.obs.firstToken(ev.Cached)
		g.Metrics.observeFirstToken(a.d.Engine.Addr, len(a.req.tokens), time.Since(a.sent), a.d.PredictedCached, int(ev.Cached))
		if err := a.out.start(a.d.Engine.Info().ID); err != nil {
			a.s.Cancel(wire.CancelClientGone)
			return a.out.gone(), false, nil, true
		}
	}
	if ev.Last && !ev.First && ev.Cached > 0 { // counted only at the end (vLLM's final usage, through the bridge)
		g.Metrics.observeLateCached(a.d.Engine.Addr, int(ev.Cached)-int(a.usage.Cached))
		a.obs.lateCached(ev.Cached)
		a.usage.Cached = ev.Cached
	}
	a.d.Generated(len(ev.Tokens))
	text, used, stopped := a.outputText(g, ev)
	ev.Tokens, ev.Logprobs = ev.Tokens[:used], ev.Logprobs[:min(used, len(ev.Logprobs))] // not those after a stop string
	g.addLogprobs(a, ev)
	a.generated += used
	if err := a.emit(text, ev.Last || stopped); err != nil {
		a.s.Cancel(wire.CancelClientGone)
		return a.out.gone(), false, nil, true
	}
	// The engine's work ends with its last token (or the CANCEL a stop
	// string sends): release the reservation before writing the end, so a
	// client's next request never sees this one's load.
	if stopped {
		a.s.Cancel(wire.CancelClientGone)
		a.d.Done()
		a.usage.Prompt, a.usage.Completion = uint32(len(a.req.tokens)), uint32(a.generated)
		_ = a.out.finish(api.End{Finish: api.FinishStop, Usage: a.usage, StopSequence: a.stops.Matched()})
		return 200, false, nil, true
	}
	if ev.Last {
		a.d.Done()
		a.usage.Prompt, a.usage.Completion = ev.PromptTokens, ev.CompletionTokens
		_ = a.out.finish(api.End{Finish: finishOf(ev.Finish), Usage: a.usage})
		return 200, false, nil, true
	}
	return 0, false, nil, false
}

// outputText detokenizes the event's tokens and matches stop strings in
// the text, except in the text of the first min_tokens tokens (vLLM's stop
// checker starts after them); stopped says a stop string ended it, and
// used is how many of the event's tokens the output took: all, or up to
// the one that completed the stop string (stopByToken).
func (a *attempt) outputText(g *Gateway, ev engine.Event) (text string, used int, stopped bool) {
	toks := g.textTokens(a, ev)
	free := min(len(toks), max(0, int(a.req.Extras.MinTokens)-a.generated))
	a.buf = a.detok.Next(a.buf[:0], toks[:free])
	exempt := len(a.buf)
	if a.stops.Active() && len(toks)-free > 1 {
		return a.stopByToken(ev, toks, free, exempt)
	}
	a.buf = a.detok.Next(a.buf, toks[free:])
	if ev.Last {
		a.buf = a.detok.Flush(a.buf)
	}
	if free == len(toks) && !ev.Last {
		return a.textOf(a.buf), len(ev.Tokens), false
	}
	text, stopped = a.stops.Feed(a.textOf(a.buf[exempt:]), ev.Last)
	return a.textOf(a.buf[:exempt]) + text, len(ev.Tokens), stopped
}

// textTokens are the event's tokens that are output text: with special
// tokens kept, not the special token that stopped the request (EOS, a
// stop token id), as vLLM's detokenizer skips the token that stopped it.
func (g *Gateway) textTokens(a *attempt, ev engine.Event) []uint32 {
	toks := ev.Tokens
	if n := len(toks); n > 0 && ev.Last && ev.Finish == wire.FinishStop && a.req.parser.Tools != nil {
		last := toks[n-1 : n]
		if tok := a.req.model.Tok; tok.DecodeString(last, true) == "" && tok.DecodeString(last, false) != "" {
			return toks[:n-1]
		}
	}
	return toks
}

// emit parses output text into pieces and sends them on. A whole
// response is parsed at its end in one go, so a tool call that turns out
// malformed (or cut by a stop string) is all text; a stream's pieces go
// out as they are known.
func (a *attempt) emit(text string, end bool) error {
	if !a.req.Stream {
		a.whole = append(a.whole, text...)
		if !end {
			return nil
		}
		text = a.wholeText()
	}
	a.pieces = a.req.parser.Feed(a.pieces[:0], text, end)
	for _, p := range a.pieces {
		if err := a.out.delta(p); err != nil {
			return err
		}
	}
	return nil
}

// wholeText is a whole response's text, parsed at its end. Without a
// reasoning or tool parser it is a.whole itself, no copy: each piece's
// text is copied by the encoder (into the body it collects), and a.whole
// is reused only by the attempt that takes a from the pool. A parser may
// keep text across Feed calls, so it gets a copy.
func (a *attempt) wholeText() string {
	if len(a.whole) > 0 && a.req.parser.Reasoning == nil && a.req.parser.Tools == nil {
		return unsafe.String(&a.whole[0], len(a.whole))
	}
	return string(a.whole)
}

// finishOf maps the engine's finish reason onto the APIs'.
func finishOf(f wire.FinishReason) api.Finish {
	switch f {
	case wire.FinishLength:
		return api.FinishLength
	case wire.FinishAbort, wire.FinishCancelled:
		return api.FinishAbort
	}
	return api.FinishStop
}
