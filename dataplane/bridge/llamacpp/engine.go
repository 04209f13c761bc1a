package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Engine drives llama-server as a wire-protocol backend: a GENERATE
// becomes a streaming POST /completion whose prompt is the token ids
// (cache_prompt on, so the slot's cache is reused), that asks for each
// token's id (return_tokens) and its timings (timings_per_token, for the
// cached prompt tokens on the first frame); each event becomes a TOKENS
// frame; CANCEL closes the HTTP request, which llama.cpp takes as the
// task's cancellation.
type Engine struct {
	URL    string // base URL, e.g. http://127.0.0.1:8080
	Model  string
	Client *http.Client
	Log    *slog.Logger
	Out    *serve.Server // where TOKENS go; set before serving
	// Pieces recovers the ids llama.cpp's stream leaves out (recover.go);
	// nil counts every left-out id as lost.
	Pieces *Pieces

	cache  cacheView // where the requests' cache changes go; nil: nowhere
	reqs   bridgeutil.Requests
	nextID atomic.Uint64
	ids    idCounts
}

// idCounts counts the ids the stream left out, by what became of them.
type idCounts struct{ recovered, guessed, lost atomic.Uint64 }

// IDCounts are the ids llama.cpp's streams left out: recovered exactly,
// guessed (one of several spellings of the same text), and lost (left out
// at the end of generation, or past recovering).
type IDCounts struct{ Recovered, Guessed, Lost uint64 }

// IDs returns the counts so far.
func (e *Engine) IDs() IDCounts {
	return IDCounts{e.ids.recovered.Load(), e.ids.guessed.Load(), e.ids.lost.Load()}
}

// cacheView is what a request tells about the cache: its prompt is in
// some slot (held), it ended on a slot leaving tokens there (settled), or
// it ended without saying where (ended).
type cacheView interface {
	held(id uint64, prompt []uint32)
	settled(id uint64, slot int, tokens []uint32, cached int)
	ended(id uint64, tokens []uint32)
}

// NewEngine returns an Engine for the llama-server at url serving model.
func NewEngine(url, model string, pieces *Pieces, log *slog.Logger) *Engine {
	return &Engine{URL: url, Model: model, Client: bridgeutil.NewHTTPClient(), Log: log, Pieces: pieces}
}

// completionRequest is the body of POST /completion (the fields of
// make_llama_cmpl_schema, tools/server/server-schema.cpp at 80fb11ac).
// top_k, top_p and min_p are always sent: the server's defaults (40, 0.95
// and 0.05) are not the router's (disabled).
type completionRequest struct {
	Prompt          []uint32 `json:"prompt"`
	NPredict        uint32   `json:"n_predict"`
	Temperature     float32  `json:"temperature"`
	TopP            float32  `json:"top_p"`
	TopK            int32    `json:"top_k"`
	MinP            float32  `json:"min_p"`
	Seed            *uint32  `json:"seed,omitempty"`
	IgnoreEOS       bool     `json:"ignore_eos"`
	CachePrompt     bool     `json:"cache_prompt"`
	Stream          bool     `json:"stream"`
	ReturnTokens    bool     `json:"return_tokens"`
	TimingsPerToken bool     `json:"timings_per_token"`
	ResponseFields  []string `json:"response_fields"`
}

// lastEventFields trims the last event to what the bridge reads: left
// whole it carries the generation settings and the prompt's text.
var lastEventFields = []string{"content", "tokens", "stop", "id_slot", "tokens_predicted", "tokens_evaluated",
	"tokens_cached", "stop_type", "truncated", "timings"}

// refuse is the stream error for a GENERATE field llama.cpp cannot honour.
func refuse(code wire.ErrorCode, field, why string) error {
	return &serve.StreamError{Code: code, Message: fmt.Sprintf("%s: %s (llama.cpp)", field, why)}
}

// request is g as llama.cpp's request, or the refusal of the first field
// it cannot honour. Stop token ids have no counterpart (llama.cpp stops on
// strings and its own end-of-generation tokens): the relay stops at them.
func (e *Engine) request(g *wire.Generate) (*completionRequest, error) {
	switch {
	case string(g.Model) != e.Model:
		return nil, refuse(wire.CodeUnknownModel, "model", fmt.Sprintf("%q is not served here", g.Model))
	case g.LoRAID != 0:
		return nil, refuse(wire.CodeUnknownLoRA, "lora_id", "adapters are not bridged")
	case g.MMItems.Len() > 0:
		return nil, refuse(wire.CodeBadRequest, "mm_items", "the bridge forwards token prompts only")
	case len(g.Guided) > 0:
		return nil, refuse(wire.CodeBadRequest, "guided", "structured output is not bridged")
	case len(g.KVTransfer) > 0:
		return nil, refuse(wire.CodeBadRequest, "kv_transfer", "no disaggregated prefill")
	case len(g.CacheSalt) > 0:
		return nil, refuse(wire.CodeBadRequest, "cache_salt", "the prompt cache is shared by every request")
	case g.Priority != 0:
		return nil, refuse(wire.CodeBadRequest, "priority", "requests are served first come, first served")
	case g.DPRank != 0 && g.DPRank != wire.AnyRank:
		return nil, refuse(wire.CodeBadRequest, "dp_rank", "one rank, 0")
	case g.MaxTokens > math.MaxInt32:
		return nil, refuse(wire.CodeBadRequest, "max_tokens", "at most 2147483647")
	case g.Flags&wire.GenHasSeed != 0 && g.Seed >= math.MaxUint32:
		return nil, refuse(wire.CodeBadRequest, "seed", "seeds are 32-bit, 4294967295 meaning random")
	}
	body := &completionRequest{Prompt: g.Prompt.AppendTo(nil), NPredict: g.MaxTokens, Temperature: g.Temperature,
		TopP: g.TopP, TopK: max(g.TopK, 0), IgnoreEOS: g.Flags&wire.GenIgnoreEOS != 0,
		CachePrompt: true, Stream: true, ReturnTokens: true, TimingsPerToken: true, ResponseFields: lastEventFields}
	if !(body.TopP > 0 && body.TopP <= 1) {
		body.TopP = 1
	}
	if g.Flags&wire.GenHasSeed != 0 {
		seed := uint32(g.Seed)
		body.Seed = &seed
	}
	return body, nil
}

// Generate implements serve.Backend.
func (e *Engine) Generate(k serve.Key, g *wire.Generate) error {
	body, err := e.request(g)
	if err != nil {
		return err
	}
	r := &relay{e: e, k: k, id: e.nextID.Add(1), prompt: body.Prompt, stops: g.StopTokens.AppendTo(nil),
		wantText: g.Flags&wire.GenWantText != 0, faithful: true}
	go e.run(wire.WithTrace(e.reqs.Start(k), g), r, body)
	return nil
}

// Cancel implements serve.Backend.
func (e *Engine) Cancel(k serve.Key) { e.reqs.Cancel(k) }

// Idle implements serve.Backend.
func (e *Engine) Idle() bool { return e.reqs.Idle() }

// run streams one completion and relays it.
func (e *Engine) run(ctx context.Context, r *relay, body *completionRequest) {
	defer e.reqs.Done(r.k)
	b, _ := json.Marshal(body)
	req, err := bridgeutil.GenerationPost(ctx, e.URL+"/completion", b)
	if err != nil {
		e.Out.Fail(r.k, wire.CodeStreamFailed, err.Error())
		return
	}
	wire.SetTraceHeaders(ctx, req.Header) // the GENERATE's trace section as W3C traceparent/tracestate
	resp, err := e.Client.Do(req)
	if err != nil {
		bridgeutil.Unreachable(e.Out, ctx, r.k, "llama.cpp", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		e.Out.Fail(r.k, bridgeutil.CodeOfStatus(resp.StatusCode), fmt.Sprintf("llama.cpp answered %d: %s", resp.StatusCode, errorMessage(msg)))
		return
	}
	end, err := decodeStream(resp.Body, r.event)
	switch {
	case end == streamDone:
		return // the last event settled the request
	case end == streamRefused && errors.Is(err, errStopToken):
	case end == streamMalformed:
		e.Out.Fail(r.k, wire.CodeStreamFailed, "llama.cpp sent a malformed event: "+err.Error())
	case end == streamEngineError:
		bridgeutil.Broken(e.Out, ctx, r.k, wire.CodeStreamFailed, "llama.cpp failed the stream: "+err.Error())
	default:
		bridgeutil.Broken(e.Out, ctx, r.k, wire.CodeStreamFailed, "llama.cpp's stream ended before its last event: "+err.Error())
	}
	r.orphan()
}
