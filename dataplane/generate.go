package dataplane

import (
	"errors"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// genRequest is an API request reduced to what the engines need.
type genRequest struct {
	reqID       string
	model       string
	tokens      []uint32
	maxTokens   uint32
	temperature float32
	topP        float32
	topK        int32
	seed        *uint64
	ignoreEOS   bool
	stopIDs     []uint32
	stopStrings []string
	session     string
	// guided is the structured-output constraint for engines with
	// FeatureGuided (response_format, tool_choice), nil when unconstrained.
	guided []byte
}

// usage is what the engine reported for a finished request.
type usage struct {
	prompt, completion, cached uint32
}

// output encodes one API's response. start is called once, before any
// delta, when the first token arrives; fail before start sends an error
// response, after start an in-stream error.
type output interface {
	start(engineID string) error
	delta(text string) error
	finish(reason string, u usage) error
	fail(e *apiError)
}

// beginResponse names the serving engine and, for a stream, sends the
// event-stream header; a whole response's header goes out with its body.
func beginResponse(w *httpx.ResponseWriter, engineID string, stream bool) error {
	w.Header().Set("x-kvgate-engine", engineID)
	if !stream {
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	return w.Stream(200)
}

// run routes req, streams its tokens through out, and returns the HTTP
// status. An engine that fails before the first token costs the client
// nothing: the request is routed again, up to g.Retries times.
func (g *Gateway) run(w *httpx.ResponseWriter, req *genRequest, out output) int {
	gen := &wire.Generate{RequestID: []byte(req.reqID), Model: []byte(req.model), MaxTokens: req.maxTokens,
		Temperature: req.temperature, TopP: req.topP, TopK: req.topK, DPRank: wire.AnyRank,
		StopTokens: wire.TokensOf(req.stopIDs), Prompt: wire.TokensOf(req.tokens), Guided: req.guided}
	if req.seed != nil {
		gen.Seed, gen.Flags = *req.seed, gen.Flags|wire.GenHasSeed
	}
	if req.ignoreEOS {
		gen.Flags |= wire.GenIgnoreEOS
	}
	var lastErr error
	for attempt := 0; attempt <= g.Retries; attempt++ {
		t0 := time.Now()
		rr := &route.Request{Model: req.model, Tokens: req.tokens, Session: req.session}
		if req.guided != nil {
			rr.Needs = wire.FeatureGuided
		}
		d, err := g.Router.Route(rr)
		g.Metrics.routeSeconds.Observe(time.Since(t0).Seconds())
		if err != nil {
			switch {
			case errors.Is(err, route.ErrNoEngine) && req.guided != nil:
				out.fail(badRequest("response_format", "structured output (response_format or a forced tool_choice) is not supported by any ready engine of model "+req.model))
				return 400
			case errors.Is(err, route.ErrNoEngine):
				out.fail(&apiError{status: 503, message: "no engine is ready for model " + req.model, retryAfter: 1})
				return 503
			case errors.Is(err, route.ErrQueueFull):
				out.fail(&apiError{status: 429, kind: "rate_limit_error", message: "every engine for model " + req.model + " is at its queue limit", retryAfter: 1})
				return 429
			}
			out.fail(&apiError{status: 500, message: err.Error()})
			return 500
		}
		status, retry, err := g.stream(w, req, gen, d, out)
		d.Done()
		if !retry {
			return status
		}
		lastErr = err
		g.Log.Warn("re-routing before first token", "request", req.reqID, "engine", d.Engine.Addr, "err", err)
	}
	out.fail(&apiError{status: 502, message: "engines failed before the first token: " + errString(lastErr)})
	return 502
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// stream runs one attempt on the decided engine. retry is true when nothing
// reached the client and another engine may serve the request.
func (g *Gateway) stream(w *httpx.ResponseWriter, req *genRequest, gen *wire.Generate, d *route.Decision, out output) (status int, retry bool, err error) {
	base, lora, ok := d.Engine.Resolve(req.model)
	if !ok {
		return 0, true, engine.ErrNotReady
	}
	gen.Model, gen.LoRAID = []byte(base), lora
	s, err := d.Engine.Generate(gen)
	if err != nil {
		return 0, true, err
	}
	detok := g.Tok.NewStream(true)
	stops := newStopMatcher(req.stopStrings)
	started := false
	timeout := time.NewTimer(g.FirstTokenTimeout)
	defer timeout.Stop()
	sent := time.Now()
	var u usage
	var buf []byte
	for {
		select {
		case <-s.Ready():
		case <-w.Gone():
			s.Cancel(wire.CancelClientGone)
			return 499, false, nil
		case <-timeout.C:
			if !started {
				s.Cancel(wire.CancelTimeout)
				out.fail(&apiError{status: 504, message: "no first token from the engine in time"})
				return 504, false, nil
			}
			continue
		}
		for _, ev := range s.Take() {
			if status, retry, err, done := g.handle(req, d, s, out, ev, &started, detok, stops, &u, &buf, sent); done {
				return status, retry, err
			}
		}
	}
}

// handle applies one stream event; done says the attempt is over.
func (g *Gateway) handle(req *genRequest, d *route.Decision, s *engine.Stream, out output, ev engine.Event,
	started *bool, detok *tokenize.Stream, stops *stopMatcher, u *usage, buf *[]byte, sent time.Time) (status int, retry bool, err error, done bool) {
	if ev.Err != nil {
		if !*started {
			var re *wire.RemoteError
			overloaded := errors.As(ev.Err, &re) && re.Code == wire.CodeOverloaded
			if errors.Is(ev.Err, engine.ErrEngineDown) || overloaded {
				return 0, true, ev.Err, true
			}
			out.fail(&apiError{status: 502, message: "engine error: " + ev.Err.Error()})
			return 502, false, nil, true
		}
		out.fail(&apiError{status: 502, message: "engine failed mid-stream: " + ev.Err.Error()})
		return 502, false, nil, true
	}
	if ev.First {
		*started = true
		d.FirstToken()
		u.cached = ev.Cached
		g.Metrics.firstToken(time.Since(sent), d.PredictedCached, int(ev.Cached))
		if err := out.start(d.Engine.Info().ID); err != nil {
			s.Cancel(wire.CancelClientGone)
			return 499, false, nil, true
		}
	}
	d.Generated(len(ev.Tokens))
	*buf = detok.Next((*buf)[:0], ev.Tokens)
	if ev.Last {
		*buf = detok.Flush(*buf)
	}
	text, stopped := stops.feed(string(*buf), ev.Last)
	if text != "" {
		if err := out.delta(text); err != nil {
			s.Cancel(wire.CancelClientGone)
			return 499, false, nil, true
		}
	}
	if stopped {
		s.Cancel(wire.CancelClientGone)
		u.prompt = uint32(len(req.tokens))
		_ = out.finish("stop", *u)
		return 200, false, nil, true
	}
	if ev.Last {
		u.prompt, u.completion = ev.PromptTokens, ev.CompletionTokens
		reason := "stop"
		switch ev.Finish {
		case wire.FinishLength:
			reason = "length"
		case wire.FinishAbort, wire.FinishCancelled:
			reason = "abort"
		}
		_ = out.finish(reason, *u)
		return 200, false, nil, true
	}
	return 0, false, nil, false
}

// stopMatcher finds stop strings in streamed text, holding back the tail
// that could be the start of one.
type stopMatcher struct {
	stops   []string
	maxLen  int
	pending string
}

func newStopMatcher(stops []string) *stopMatcher {
	m := &stopMatcher{stops: stops}
	for _, s := range stops {
		m.maxLen = max(m.maxLen, len(s))
	}
	return m
}

// feed takes new text and returns what may be sent, and whether a stop
// string ended the output (the stop string itself is not sent).
func (m *stopMatcher) feed(text string, last bool) (string, bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	m.pending += text
	cut := -1
	for _, s := range m.stops {
		if s == "" {
			continue
		}
		if i := strings.Index(m.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := m.pending[:cut]
		m.pending = ""
		return out, true
	}
	if last {
		out := m.pending
		m.pending = ""
		return out, false
	}
	keep := min(len(m.pending), m.maxLen-1)
	for keep > 0 && keep < len(m.pending) && !isRuneStart(m.pending[len(m.pending)-keep]) {
		keep++ // never split a UTF-8 sequence
	}
	out := m.pending[:len(m.pending)-keep]
	m.pending = m.pending[len(m.pending)-keep:]
	return out, false
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
