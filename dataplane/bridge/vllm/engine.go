package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Engine drives an OpenAI-compatible engine over HTTP as a wire-protocol
// backend: a GENERATE becomes a streaming /v1/completions call whose prompt
// is the token ids (the engine does not tokenize) and that asks for the
// generated tokens as ids; each streamed chunk becomes a TOKENS frame;
// CANCEL aborts the HTTP request. An SGLang server (Engine.SGLang) is
// driven the same way through its native /generate.
type Engine struct {
	URL    string // base URL, e.g. http://127.0.0.1:8000
	Model  string
	LoRAs  map[uint32]string // wire LoRA id -> adapter name (the model to request)
	Client *http.Client
	Log    *slog.Logger
	Out    *serve.Server // where TOKENS go; set before serving
	// SGLang, when set, makes the engine an SGLang server driven through
	// its native /generate (sglang_api.go) as the server says it runs.
	SGLang *SGLangServer
	// DPRanks are the data-parallel ranks behind URL (vLLM's
	// --data-parallel-size with its internal load balancing; 0 or 1: one).
	// A GENERATE that names a rank is sent to it (DPRankHeader); one that
	// names a rank the engine does not have is refused.
	DPRanks int
	// Residency, when set, loads and unloads adapters at run time within
	// the engine's slots (lora.go): a request for an adapter that is not
	// resident waits for its load.
	Residency *Residency
	// Disagg is the engine's part in prefill/decode disaggregation
	// (disagg.go); the zero value serves aggregated requests only.
	Disagg Disagg
	// Multimodal says the engine serves a vision model: GENERATEs with
	// images are forwarded (multimodal.go) and FeatureMultimodal announced.
	// Renders, when set, keeps the images vLLM processed for later turns.
	Multimodal bool
	Renders    *RenderCache

	reqs bridgeutil.Requests
}

// completionRequest is the body sent to the engine.
type completionRequest struct {
	Model          string         `json:"model"`
	Prompt         []uint32       `json:"prompt"`
	MaxTokens      uint32         `json:"max_tokens"`
	Temperature    float32        `json:"temperature"`
	TopP           float32        `json:"top_p,omitempty"`
	TopK           int32          `json:"top_k,omitempty"`
	Seed           *uint64        `json:"seed,omitempty"`
	StopTokenIDs   []uint32       `json:"stop_token_ids,omitempty"`
	IgnoreEOS      bool           `json:"ignore_eos,omitempty"`
	CacheSalt      string         `json:"cache_salt,omitempty"`
	Priority       int32          `json:"priority,omitempty"`
	Stream         bool           `json:"stream"`
	StreamOptions  map[string]any `json:"stream_options,omitempty"`
	ReturnTokenIDs bool           `json:"return_token_ids"`
	RequestID      string         `json:"request_id,omitempty"`
	samplingFields
}

func (e *Engine) model(lora uint32) (string, error) {
	if lora == 0 {
		return e.Model, nil
	}
	if name, ok := e.LoRAs[lora]; ok {
		return name, nil
	}
	return "", &serve.StreamError{Code: wire.CodeUnknownLoRA, Message: fmt.Sprintf("LoRA adapter %d not served", lora)}
}

// Generate implements serve.Backend.
func (e *Engine) Generate(k serve.Key, g *wire.Generate) error {
	if string(g.Model) != e.Model {
		return &serve.StreamError{Code: wire.CodeUnknownModel, Message: "model " + string(g.Model) + " is not served here"}
	}
	if g.Flags&wire.GenHandoff != 0 || e.Disagg.Role == wire.RolePrefill {
		return e.generateHandoff(k, g) // disagg.go
	}
	if g.MMItems.Len() > 0 && e.Multimodal && e.SGLang == nil && len(g.Guided) == 0 && len(g.KVTransfer) == 0 {
		return e.generateMultimodal(k, g) // multimodal.go
	}
	if g.MMItems.Len() > 0 || len(g.Guided) > 0 || len(g.KVTransfer) > 0 {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: "the bridge forwards token prompts only (no multimodal items, guided output or KV transfer)"}
	}
	if e.SGLang != nil {
		if g.Flags&wire.GenSampling != 0 {
			return &serve.StreamError{Code: wire.CodeBadRequest, Message: "the SGLang mode announces no SAMPLING: penalties, logit_bias, min_tokens and logprobs are not forwarded"}
		}
		return e.generateSGLang(k, g)
	}
	body, rank, err := e.completionBody(g)
	if err != nil {
		return err
	}
	ctx := wire.WithTrace(e.reqs.Start(k), g) // the engine's HTTP request carries the trace (post)
	if g.LoRAID != 0 && e.Residency != nil {
		go e.runAdapter(ctx, k, g.LoRAID, body, rank)
		return nil
	}
	go e.run(ctx, k, body, rank)
	return nil
}

// completionBody is g as the streamed token-id completion request vLLM
// is sent, and the data-parallel rank it goes to (-1: vLLM's choice).
func (e *Engine) completionBody(g *wire.Generate) (*completionRequest, int, error) {
	model, err := e.model(g.LoRAID)
	if err != nil {
		return nil, 0, err
	}
	rank, err := e.rankOf(g)
	if err != nil {
		return nil, 0, err
	}
	body := completionRequest{Model: model, Prompt: g.Prompt.AppendTo(nil), MaxTokens: g.MaxTokens, Temperature: g.Temperature,
		TopP: g.TopP, TopK: g.TopK, StopTokenIDs: g.StopTokens.AppendTo(nil), IgnoreEOS: g.Flags&wire.GenIgnoreEOS != 0,
		CacheSalt: string(g.CacheSalt), Priority: g.Priority, Stream: true, ReturnTokenIDs: true, RequestID: string(g.RequestID),
		StreamOptions: map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	if g.Flags&wire.GenHasSeed != 0 {
		seed := g.Seed
		body.Seed = &seed
	}
	body.samplingFields = samplingOf(g)
	return &body, rank, nil
}

// Cancel implements serve.Backend.
func (e *Engine) Cancel(k serve.Key) { e.reqs.Cancel(k) }

// Idle implements serve.Backend.
func (e *Engine) Idle() bool { return e.reqs.Idle() }

// run streams one completion, on data-parallel rank (-1: the engine's
// choice), and relays it.
func (e *Engine) run(ctx context.Context, k serve.Key, body *completionRequest, rank int) {
	defer e.reqs.Done(k)
	resp, ok := e.post(ctx, k, "/v1/completions", body, rank)
	if !ok {
		return
	}
	defer resp.Body.Close()
	s := relay{e: e, k: k, topN: body.topN()}
	end, err := decodeSSE(resp.Body, s.chunk)
	e.ended(ctx, k, end, err, s.finish)
}

// post sends body to the engine's path, naming a data-parallel rank unless
// it is -1, and returns its 200 response; on anything else it fails the
// stream and reports false.
func (e *Engine) post(ctx context.Context, k serve.Key, path string, body any, rank int) (*http.Response, bool) {
	b, _ := json.Marshal(body)
	req, err := bridgeutil.GenerationPost(ctx, e.URL+path, b) // asked again if a reused connection was closed
	if err != nil {
		e.Out.Fail(k, wire.CodeStreamFailed, err.Error())
		return nil, false
	}
	wire.SetTraceHeaders(ctx, req.Header) // the GENERATE's trace section as W3C traceparent/tracestate
	setRank(req.Header, rank)
	resp, err := e.Client.Do(req)
	if err != nil {
		bridgeutil.Unreachable(e.Out, ctx, k, "engine", err)
		return nil, false
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		code := bridgeutil.CodeOfStatus(resp.StatusCode)
		if cr, ok := body.(*completionRequest); ok && resp.StatusCode == http.StatusNotFound && e.Residency != nil && e.Residency.Vanished(cr.Model) {
			code = wire.CodeOverloaded // the adapter is gone (an engine restart): the router re-routes, a load follows
		}
		e.Out.Fail(k, code, fmt.Sprintf("engine answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
		return nil, false
	}
	return resp, true
}

// ended ends a stream as decodeSSE says it ended: finish sends the last
// frame of one that reached [DONE].
func (e *Engine) ended(ctx context.Context, k serve.Key, end sseEnd, err error, finish func()) {
	switch end {
	case sseDone:
		finish()
	case sseMalformed:
		e.Out.Fail(k, wire.CodeStreamFailed, "engine sent a malformed chunk: "+err.Error())
	case sseEngineError:
		bridgeutil.Broken(e.Out, ctx, k, wire.CodeStreamFailed, "engine failed the stream: "+err.Error())
	case sseRefused:
		e.Out.Fail(k, wire.CodeStreamFailed, err.Error())
	default:
		bridgeutil.Broken(e.Out, ctx, k, wire.CodeStreamFailed, "engine stream ended without [DONE]: "+err.Error())
	}
}

// relay turns chunks into TOKENS frames.
type relay struct {
	e                  *Engine
	k                  serve.Key
	sentFirst          bool
	reason             string
	prompt, completion uint32
	cached             uint32
	// topN is the alternatives per token the GENERATE asked for; -1: it
	// asked for no logprobs.
	topN int
}

func (s *relay) chunk(c *chunk) error {
	if c.Usage != nil {
		s.prompt, s.completion = c.Usage.PromptTokens, c.Usage.CompletionTokens
		if d := c.Usage.PromptTokensDetails; d != nil {
			s.cached = d.CachedTokens
		}
	}
	var ids []uint32
	var lps []wire.LogprobEntry
	for _, ch := range c.Choices {
		if ch.Text != "" && len(ch.TokenIDs) == 0 {
			return noTokenIDs(c)
		}
		ids = append(ids, ch.TokenIDs...)
		if s.topN >= 0 && len(ch.TokenIDs) > 0 {
			entries, err := ch.Logprobs.entries(len(ch.TokenIDs), s.topN)
			if err != nil {
				return err
			}
			lps = append(lps, entries...)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.reason = *ch.FinishReason
		}
	}
	if len(ids) == 0 {
		return nil
	}
	m := wire.TokensMsg{Tokens: wire.TokensOf(ids)}
	if s.topN >= 0 {
		l, err := wire.LogprobsOf(s.topN, lps)
		if err != nil {
			return err
		}
		m.Flags, m.Logprobs = wire.TokLogprobs, l
	}
	if !s.sentFirst {
		m.Flags, m.CachedTokens, s.sentFirst = m.Flags|wire.TokFirst, s.cached, true
	}
	s.e.Out.Deliver([]serve.Tokens{{Key: s.k, Msg: m}})
	return nil
}

// finish sends the last frame: finish reason and usage.
func (s *relay) finish() {
	// vLLM reports cached_tokens only in its final usage chunk (and only
	// with --enable-prompt-tokens-details), after the first token went out:
	// the last frame carries it (PROTOCOL.md 6.2).
	m := wire.TokensMsg{Flags: wire.TokLast, Finish: finishOf(s.reason), PromptTokens: s.prompt, CompletionTokens: s.completion,
		CachedTokens: s.cached}
	if !s.sentFirst {
		m.Flags |= wire.TokFirst
	}
	s.e.Out.Deliver([]serve.Tokens{{Key: s.k, Msg: m}})
}

func finishOf(reason string) wire.FinishReason {
	switch strings.ToLower(reason) {
	case "length":
		return wire.FinishLength
	case "abort":
		return wire.FinishAbort
	}
	return wire.FinishStop
}
