package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// SGLang's HTTP API, as the bridge drives it (sgl-project/sglang:
// python/sglang/srt/entrypoints/http_server.py at
// 0025436eab0556737d615b36a4dd3e1e26e82f3d, managers/io_struct.py and
// managers/tokenizer_manager.py at 001067fffe33427bee0ed2f007fb7551a1d76b44).
//
// The bridge uses the native POST /generate, not /v1/completions: only
// recent versions stream token ids from the OpenAI API (return_token_ids,
// entrypoints/openai/serving_completions.py at 004c82e07d876f6e4a0ad6e1532570
// 6b0f478f1a), and cached_tokens reaches its usage only with
// --enable-cache-report, while /generate has taken input_ids and streamed
// output_ids with meta_info.cached_tokens for a long time:
//
//	request:  {"input_ids": [...], "sampling_params": {"max_new_tokens": n, "temperature": t, ...},
//	           "stream": true, "rid": "...", "data_parallel_rank": r, "priority": p, "cache_salt": "..."}
//	stream:   data: {"text": "...", "output_ids": [...], "meta_info": {"id": "...", "finish_reason": null,
//	           "prompt_tokens": 120, "completion_tokens": 3, "cached_tokens": 64, ...}}
//	          ...
//	          data: {..., "meta_info": {..., "finish_reason": {"type": "length", "length": 16}}}
//	          data: [DONE]
//	error:    data: {"error": {"message": "..."}} then data: [DONE]; before the stream,
//	          a status >= 400 with {"error": {"message": ...}} or {"object": "error", "message": ...}
//
// output_ids are every id generated so far by default, or only the new
// ones when the server runs with --incremental-streaming-output (formerly
// --stream-output); a request cannot choose. meta_info.completion_tokens
// tells them apart (generateRelay). finish_reason is null until the last
// chunk, then {"type": "stop" | "length" | "abort", ...}; an abort with a
// status_code is an error (too long a prompt, an engine fault), one
// without is a cancellation. sampling_params is SamplingParams(**params):
// a key the version does not know fails the request, so the bridge sends
// only what the request sets beyond the basics.

// SGLangServer is what an SGLang server says of itself in GET
// /get_server_info (its ServerArgs, the scheduler's info and the version):
// the fields the bridge checks its flags against and drives it by.
type SGLangServer struct {
	Version         string `json:"version"`
	ServedModelName string `json:"served_model_name"`
	ModelPath       string `json:"model_path"`
	PageSize        int    `json:"page_size"`
	DPSize          int    `json:"dp_size"`
	DPAttention     bool   `json:"enable_dp_attention"`
	// KVEventsConfig is --kv-events-config as the server holds it (a JSON
	// string, or null without events).
	KVEventsConfig json.RawMessage `json:"kv_events_config"`
	EnableMetrics  bool            `json:"enable_metrics"`
	// MaxTotalNumTokens is the KV pool in tokens (the scheduler's info).
	MaxTotalNumTokens uint64 `json:"max_total_num_tokens"`
	// Priority scheduling is off unless --enable-priority-scheduling;
	// larger values run first unless --schedule-low-priority-values-first.
	PriorityScheduling bool `json:"enable_priority_scheduling"`
	LowPriorityFirst   bool `json:"schedule_low_priority_values_first"`
}

// ErrSGLangMismatch is the error of SGLangServer.Check: the server is not
// what the bridge's flags say.
var ErrSGLangMismatch = errors.New("vllm: the SGLang server differs from the bridge's flags")

// FetchSGLangServer reads url's /get_server_info. A server without it (404)
// or that answers without ServerArgs' model_path and served_model_name is
// not SGLang (ErrSGLangMismatch); another status is an error to try again
// on. Older versions say no version (only the ServerArgs).
func FetchSGLangServer(ctx context.Context, c *http.Client, url string) (*SGLangServer, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/get_server_info", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("%w: %s/get_server_info answered %d: not an SGLang server", ErrSGLangMismatch, url, resp.StatusCode)
	case resp.StatusCode != http.StatusOK: // starting, overloaded: ask again
		return nil, fmt.Errorf("vllm: %s/get_server_info answered %d", url, resp.StatusCode)
	}
	var s SGLangServer
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("reading %s/get_server_info: %w", url, err)
	}
	if s.ModelPath == "" && s.ServedModelName == "" {
		return nil, fmt.Errorf("%w: %s/get_server_info has no model_path or served_model_name: not an SGLang server", ErrSGLangMismatch, url)
	}
	if s.PageSize == 0 { // versions before --page-size: token by token
		s.PageSize = 1
	}
	return &s, nil
}

// Check reports, by flag and server argument, how the server differs from
// what the bridge was told: the model it serves (--model against
// --served-model-name), the page size (--block-size against --page-size:
// every KV event of another size would be skipped), the data-parallel
// ranks publishing events (--dp-ranks against --dp-size) and, when
// events is set, whether it publishes them at all (--kv-events-config).
func (s *SGLangServer) Check(model string, blockSize, dpRanks int, events bool) error {
	var diffs []string
	if s.ServedModelName != model {
		diffs = append(diffs, fmt.Sprintf("--model %q, but the server's --served-model-name is %q", model, s.ServedModelName))
	}
	if s.PageSize != blockSize {
		diffs = append(diffs, fmt.Sprintf("--block-size %d, but the server's --page-size is %d", blockSize, s.PageSize))
	}
	if dp := max(s.DPSize, 1); dp != dpRanks {
		diffs = append(diffs, fmt.Sprintf("--dp-ranks %d, but the server's --dp-size is %d", dpRanks, dp))
	}
	if c := string(s.KVEventsConfig); events && (c == "" || c == "null" || c == `""`) {
		diffs = append(diffs, "--kv-events, but the server runs without --kv-events-config")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrSGLangMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

// generateRequest is the body of POST /generate.
type generateRequest struct {
	InputIDs       []uint32       `json:"input_ids"`
	SamplingParams map[string]any `json:"sampling_params"`
	Stream         bool           `json:"stream"`
	RID            string         `json:"rid,omitempty"`
	// DataParallelRank is the deprecated spelling io_struct.py still
	// accepts (routed_dp_rank in the newest versions), the only one older
	// versions know.
	DataParallelRank *uint16 `json:"data_parallel_rank,omitempty"`
	Priority         *int32  `json:"priority,omitempty"`
	CacheSalt        string  `json:"cache_salt,omitempty"`
}

// generateSGLang starts a GENERATE on SGLang's /generate.
func (e *Engine) generateSGLang(k serve.Key, g *wire.Generate) error {
	if g.LoRAID != 0 {
		return &serve.StreamError{Code: wire.CodeUnknownLoRA, Message: fmt.Sprintf("LoRA adapter %d not served: the SGLang bridge serves the base model only", g.LoRAID)}
	}
	sp := map[string]any{"max_new_tokens": g.MaxTokens, "temperature": g.Temperature, "top_k": -1}
	if g.TopP > 0 {
		sp["top_p"] = g.TopP
	}
	if g.TopK > 0 {
		sp["top_k"] = g.TopK
	}
	if g.StopTokens.Len() > 0 {
		sp["stop_token_ids"] = g.StopTokens.AppendTo(nil)
	}
	if g.Flags&wire.GenIgnoreEOS != 0 {
		sp["ignore_eos"] = true
	}
	if g.Flags&wire.GenHasSeed != 0 {
		sp["sampling_seed"] = g.Seed
	}
	body := generateRequest{InputIDs: g.Prompt.AppendTo(nil), SamplingParams: sp, Stream: true, RID: string(g.RequestID), CacheSalt: string(g.CacheSalt)}
	switch dp := max(e.SGLang.DPSize, 1); {
	case g.DPRank == wire.AnyRank:
	case int(g.DPRank) >= dp:
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: fmt.Sprintf("data-parallel rank %d: the server's --dp-size is %d", g.DPRank, dp)}
	case dp > 1:
		r := g.DPRank
		body.DataParallelRank = &r
	}
	// The wire runs lower priorities first, as vLLM does; SGLang runs
	// larger ones first unless told otherwise, and ignores none it is not
	// scheduling by.
	if g.Priority != 0 && e.SGLang.PriorityScheduling {
		p := g.Priority
		if !e.SGLang.LowPriorityFirst {
			p = -p
		}
		body.Priority = &p
	}
	go e.runGenerate(wire.WithTrace(e.reqs.Start(k), g), k, &body)
	return nil
}

// runGenerate streams one /generate request and relays it.
func (e *Engine) runGenerate(ctx context.Context, k serve.Key, body *generateRequest) {
	defer e.reqs.Done(k)
	resp, ok := e.post(ctx, k, "/generate", body, -1) // the rank is in the body
	if !ok {
		return
	}
	defer resp.Body.Close()
	s := generateRelay{relay: relay{e: e, k: k}}
	end, err := decodeSSE(resp.Body, s.chunk)
	e.ended(ctx, k, end, err, s.finish)
}
