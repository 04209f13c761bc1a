package gateway

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// Gateway is the request path: it serves the OpenAI and Anthropic APIs,
// tokenizes, routes and streams tokens back. It implements httpx.Handler.
type Gateway struct {
	// Models are the models served, each with its own tokenizer, parsers,
	// context limit and aliases (model.go); a request for a model none of
	// them names is refused. Without Models, the gateway serves whatever
	// model names the engines announce with Tok, MaxModelLen, ToolParser
	// and ReasoningParser (the one-model shorthand).
	Models []*Model
	cat    atomic.Pointer[catalog] // Models by name (model.go); SetModels replaces it
	// untokenized are the announced models without a tokenizer that a
	// request asked for, each logged once.
	untokenized sync.Map
	// Tok is the one-model shorthand's tokenizer (unused with Models).
	Tok    *tokenize.Tokenizer
	Router *route.Router
	Pool   *engine.Pool
	Log    *slog.Logger
	// APIKeys are the keys a request must carry (none: no auth) until
	// SetAPIKeys replaces them.
	APIKeys map[string]bool
	keys    atomic.Pointer[map[string]bool] // SetAPIKeys's keys; nil: APIKeys
	// Retries bounds re-routing of a request whose engine failed before its
	// first token.
	Retries int
	// FirstTokenTimeout bounds the wait for the first token (504 after,
	// noticed up to a 16th of it late: alarm.go).
	FirstTokenTimeout time.Duration
	firstToken        alarm // the waits for a first token share its ticks
	// TransferTimeout bounds a disaggregated request's wait, from its
	// hand-off, for the decode engine's first frame (disagg.go; 0:
	// FirstTokenTimeout), at most route.HandoffDeadline.
	TransferTimeout time.Duration
	// Metrics counts requests and their latency; nil counts nothing.
	Metrics *Metrics
	// Passthrough holds the HTTP engines (--http-engine), nil without.
	Passthrough *passthrough.Pool
	// MaxModelLen is the context length in tokens, prompt plus output
	// (0: the tokenizer's model_max_length).
	MaxModelLen int
	// ToolParser names the tool-call syntax of the model's output
	// (hermes, llama3_json, deepseek_v3, none; "": read from the chat
	// template), ReasoningParser its reasoning (qwen3, deepseek_r1, none;
	// "": the template's <think>).
	ToolParser, ReasoningParser string
	// Media takes images (media.go); nil: requests with images are refused.
	Media *Media
	// Observe writes the access log and traces requests (accesslog.go,
	// trace.go); nil observes nothing.
	Observe *Observer
}

// ServeHTTP implements httpx.Handler.
// A panic anywhere on the request path is answered 500 in the API's
// shape (or, once a stream began, ends the connection), logged with its
// stack, and costs no one else.
func (g *Gateway) ServeHTTP(w *httpx.ResponseWriter, r *httpx.Request) {
	start := time.Now()
	reqID := requestID(r.Header.Get("X-Request-Id"))
	w.Header().Set("x-request-id", reqID)
	flavor := api.OpenAI
	if strings.HasPrefix(r.Path, "/v1/messages") {
		flavor = api.Anthropic
	}
	x := g.Observe.begin(w, r, reqID, start)
	defer func() {
		if p := recover(); p != nil {
			g.Log.Error("request panic", "request", reqID, "path", r.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			status := 500
			switch {
			case w.Finished():
			case w.Started():
				w.Abort()
			default:
				writeError(w, flavor, &api.Error{Status: 500, Message: "internal error (request " + reqID + ")"})
			}
			g.Metrics.observeRequest(r.Path, status, time.Since(start))
			g.Observe.end(w, x, status)
		}
	}()
	status := g.serve(w, r, flavor, reqID)
	g.Metrics.observeRequest(r.Path, status, time.Since(start))
	g.Observe.end(w, x, status)
}

// requestID is the client's X-Request-Id when it is a plain token (up to
// 128 letters, digits and ._:-), else a fresh one: the id is reflected in
// the response and written to logs, where a CR, LF or quote must not go.
func requestID(v string) string {
	if len(v) == 0 || len(v) > 128 {
		return newRequestID()
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return newRequestID()
		}
	}
	return v
}

func (g *Gateway) serve(w *httpx.ResponseWriter, r *httpx.Request, flavor api.Flavor, reqID string) int {
	fail := func(e *api.Error) int { return writeError(w, flavor, e) }
	switch r.Path {
	case "/health", "/ready":
		if r.Method != "GET" && r.Method != "HEAD" {
			return methodNotAllowed(w, r, "GET", fail)
		}
		if r.Path == "/health" {
			return g.simple(w, r, 200, `{"status":"ok"}`)
		}
		if g.ready() {
			return g.simple(w, r, 200, `{"status":"ready"}`)
		}
		return g.simple(w, r, 503, `{"status":"no engine ready"}`)
	}
	if !g.authorized(r) {
		return fail(&api.Error{Status: 401, Type: "authentication_error", Message: "invalid or missing API key"})
	}
	route, ok := routes[r.Path]
	if !ok {
		return fail(api.NotFound("no route for " + r.Path))
	}
	if route.method != r.Method && !(route.method == "GET" && r.Method == "HEAD") {
		return methodNotAllowed(w, r, route.method, fail)
	}
	return route.serve(g, w, r, reqID)
}

// methodNotAllowed answers 405 with the methods the path takes (a GET
// path takes HEAD too: httpx sends its head without the content).
func methodNotAllowed(w *httpx.ResponseWriter, r *httpx.Request, method string, fail func(*api.Error) int) int {
	allow := method
	if method == "GET" {
		allow = "GET, HEAD"
	}
	w.Header().Set("Allow", allow)
	return fail(&api.Error{Status: 405, Message: "method " + strconv.Quote(r.Method) + " not allowed on " + r.Path})
}

type endpoint struct {
	method string
	serve  func(g *Gateway, w *httpx.ResponseWriter, r *httpx.Request, reqID string) int
}

var routes = map[string]endpoint{
	"/v1/completions":      {"POST", (*Gateway).completions},
	"/v1/chat/completions": {"POST", (*Gateway).chatCompletions},
	"/v1/messages":         {"POST", (*Gateway).messages},
	"/v1/responses":        {"POST", (*Gateway).responses},
	"/v1/models":           {"GET", (*Gateway).models},
	"/tokenize":            {"POST", (*Gateway).tokenizeEndpoint},
	"/detokenize":          {"POST", (*Gateway).detokenizeEndpoint},
}

func (g *Gateway) simple(w *httpx.ResponseWriter, _ *httpx.Request, status int, body string) int {
	return writeJSON(w, status, []byte(body))
}

// writeJSON sends a whole JSON response and returns its status.
func writeJSON(w *httpx.ResponseWriter, status int, body []byte) int {
	_ = finishJSON(w, status, body)
	return status
}

// finishJSON sends a whole JSON response.
func finishJSON(w *httpx.ResponseWriter, status int, body []byte) error {
	w.Header().Set("Content-Type", "application/json")
	return w.FinishBody(status, body)
}

// writeError sends e in the flavor's shape and returns its status.
func writeError(w *httpx.ResponseWriter, f api.Flavor, e *api.Error) int {
	if ra := e.RetryAfterHeader(); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	return writeJSON(w, e.Status, e.Body(f))
}

// ready reports whether every model any engine has announced has at least
// one ready engine (and there is at least one).
func (g *Gateway) ready() bool {
	models := map[string]bool{}
	for _, e := range g.Pool.Engines() {
		for _, m := range e.Info().Models {
			models[m] = models[m] || e.Ready()
		}
	}
	for _, ok := range models {
		if !ok {
			return false
		}
	}
	if len(models) == 0 && g.Passthrough != nil {
		for _, e := range g.Passthrough.Engines {
			if e.Healthy() {
				return true
			}
		}
	}
	return len(models) > 0
}

// SetAPIKeys replaces the API keys while serving (a config reload): a
// request checked after it returns is checked against keys only. Safe
// for concurrent use; keys must not change after the call.
func (g *Gateway) SetAPIKeys(keys map[string]bool) { g.keys.Store(&keys) }

func (g *Gateway) authorized(r *httpx.Request) bool {
	keys := g.APIKeys
	if p := g.keys.Load(); p != nil {
		keys = *p
	}
	if len(keys) == 0 {
		return true
	}
	if k := r.Header.Get("x-api-key"); k != "" && keys[k] {
		return true
	}
	// RFC 9110 11.1: the auth scheme is case-insensitive ("bearer" too).
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && keys[strings.TrimLeft(token, " ")]
}

// newRequestID is 96 random bits in hex. They come from the runtime's
// per-thread ChaCha8 generator (math/rand/v2), seeded by the OS: an id
// must be unique, not secret, and crypto/rand's system call was 2% of
// the router's CPU under proxybench.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	var out [24]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}
