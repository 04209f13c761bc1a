package vllmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// completions streams max_tokens tokens (deterministic in the prompt) as
// vLLM does with return_token_ids and stream_options.include_usage.
func (f *Fake) completions(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Model     string   `json:"model"`
		Prompt    []uint32 `json:"prompt"`
		MaxTokens int      `json:"max_tokens"`
		Logprobs  *int     `json:"logprobs"`
		AsIDs     bool     `json:"return_tokens_as_token_ids"`
	}
	b, _ := json.Marshal(body)
	if err := json.Unmarshal(b, &req); err != nil || len(req.Prompt) == 0 {
		http.Error(w, `{"error":{"message":"prompt must be token ids"}}`, http.StatusBadRequest)
		return
	}
	lora, ok := f.servedModel(w, req.Model)
	if !ok {
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, Request{Model: req.Model, Prompt: req.Prompt, Body: body})
	f.running++
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	if f.nixlServe(w, body, req.Prompt) { // nixl.go
		return
	}
	cached := f.admit(lora, req.Prompt)
	w.Header().Set("Content-Type", "text/event-stream")
	// As vLLM's completion stream (entrypoints/openai/completion/serving.py
	// at 030ea52e): continuous usage chunks carry counts only; the cached
	// tokens come in the final usage chunk, and only when non-zero (with
	// --enable-prompt-tokens-details).
	usage := func(n int, final bool) map[string]any {
		u := map[string]any{"prompt_tokens": len(req.Prompt), "completion_tokens": n, "total_tokens": len(req.Prompt) + n}
		if final && cached > 0 {
			u["prompt_tokens_details"] = map[string]any{"cached_tokens": cached}
		}
		return u
	}
	send := sseSender(w, r)
	toks := f.nixlTokens(body, generated(req.Prompt, req.MaxTokens))
	for i, tok := range toks {
		if f.nixlDies(w, i) {
			return
		}
		var finish any
		if i == req.MaxTokens-1 {
			finish = "length"
		}
		choice := map[string]any{"index": 0, "text": fmt.Sprintf("<%d>", tok), "token_ids": []uint32{tok}, "finish_reason": finish}
		if req.Logprobs != nil {
			choice["logprobs"] = fakeLogprobs(tok, *req.Logprobs, req.AsIDs)
		}
		if !send(map[string]any{"id": "cmpl-fake", "object": "text_completion", "model": f.Model,
			"choices": []any{choice}, "usage": usage(i+1, false)}) {
			return
		}
	}
	if send(map[string]any{"id": "cmpl-fake", "object": "text_completion", "model": f.Model, "choices": []any{}, "usage": usage(req.MaxTokens, true)}) {
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// fakeLogprobs is vLLM's CompletionLogProbs of one token with n
// alternatives: the token at FakeLogprob(0), then tok+1.. at
// FakeLogprob(1).., keyed "token_id:<id>" with asIDs (vLLM's
// return_tokens_as_token_ids) or by the fake's text "<id>".
func fakeLogprobs(tok uint32, n int, asIDs bool) map[string]any {
	name := func(t uint32) string {
		if asIDs {
			return fmt.Sprintf("token_id:%d", t)
		}
		return fmt.Sprintf("<%d>", t)
	}
	top := map[string]float32{name(tok): FakeLogprob(0)}
	for j := 1; j < n; j++ {
		top[name(tok+uint32(j))] = FakeLogprob(j)
	}
	return map[string]any{"tokens": []string{name(tok)}, "token_logprobs": []float32{FakeLogprob(0)},
		"top_logprobs": []any{top}, "text_offset": []int{0}}
}

// FakeLogprob is the logprob the fake gives a generated token's j-th most
// likely alternative (j = 0: the token itself).
func FakeLogprob(j int) float32 { return -0.5 - float32(j) }

// generated is the n tokens the fake generates for prompt: deterministic
// in the prompt, so a test knows them.
func generated(prompt []uint32, n int) []uint32 {
	seed := uint32(0)
	for _, t := range prompt {
		seed = seed*31 + t
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = 100 + (seed+uint32(i)*7919)%5000
	}
	return out
}

// Generated returns the n tokens the fake generates for prompt.
func Generated(prompt []uint32, n int) []uint32 { return generated(prompt, n) }

func (f *Fake) metrics(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	running, used := f.running, len(f.cache)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP vllm:num_requests_running Number of requests in model execution batches.\n")
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\n")
	fmt.Fprintf(w, "vllm:num_requests_running{engine=\"0\",model_name=%q} %d.0\n", f.Model, running)
	fmt.Fprintf(w, "vllm:num_requests_waiting{engine=\"0\",model_name=%q} 0.0\n", f.Model)
	fmt.Fprintf(w, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} %g\n", f.Model, float64(used)/float64(f.Capacity))
	// metrics_info() writes every CacheConfig field with str(): None
	// when offloading is off.
	size, backend := "None", "native"
	if f.kvOffload.gib > 0 {
		size, backend = fmt.Sprint(f.kvOffload.gib), f.kvOffload.backend
	}
	fmt.Fprintf(w, "vllm:cache_config_info{block_size=\"%d\",engine=\"0\",kv_offloading_backend=%q,kv_offloading_size=%q,num_gpu_blocks=\"%d\"} 1.0\n",
		f.BlockSize, backend, size, f.Capacity)
	if n := f.lora.maxLoRAs; n > 0 {
		// PrometheusStatLogger's gauge: no engine label, the time as value.
		fmt.Fprintf(w, "vllm:lora_requests_info{max_lora=\"%d\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} %d.0\n", n, time.Now().Unix())
	}
	if bb := f.kvOffload.lmcacheBlockBytes; bb > 0 {
		f.mu.Lock()
		cpu := len(f.offload.blocks) * bb
		f.mu.Unlock()
		// LMCache's gauges: one series per worker, no engine label.
		fmt.Fprintf(w, "# TYPE lmcache:local_cache_usage gauge\n")
		fmt.Fprintf(w, "lmcache:local_cache_usage{model_name=%q,worker_id=\"0\"} %d.0\n", f.Model, cpu/2)
		fmt.Fprintf(w, "lmcache:local_cache_usage{model_name=%q,worker_id=\"1\"} %d.0\n", f.Model, cpu-cpu/2)
		fmt.Fprintf(w, "lmcache:local_storage_usage{model_name=%q,worker_id=\"0\"} %d.0\n", f.Model, f.kvOffload.lmcacheDiskBytes)
	}
}

// Serve runs a prompt through the cache as a request would (events
// included) without the HTTP API.
func (f *Fake) Serve(prompt []uint32) int { return f.admit("", prompt) }

// ServeLoRA is Serve for a request to an adapter the fake serves (WithLoRA).
func (f *Fake) ServeLoRA(adapter string, prompt []uint32) int { return f.admit(adapter, prompt) }

// Blocks counts the blocks in the fake's (GPU) cache.
func (f *Fake) Blocks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cache)
}

// models answers GET /v1/models as vLLM does (serving_models.py,
// show_available_models at 075e9ba): the base model's card with its
// max_model_len, then one card per adapter, without one.
func (f *Fake) models(maxModelLen int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cards := []map[string]any{{"id": f.Model, "object": "model", "owned_by": "vllm", "root": f.Model, "parent": nil,
			"max_model_len": maxModelLen, "permission": []any{}}}
		f.mu.Lock()
		for name := range f.loras {
			root := f.lora.roots[name] // a runtime adapter's lora_path
			if root == "" {
				root = "/adapters/" + name
			}
			cards = append(cards, map[string]any{"id": name, "object": "model", "owned_by": "vllm", "root": root,
				"parent": f.Model, "max_model_len": nil, "permission": []any{}})
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": cards})
	}
}

// sseSender writes one SSE event of v's JSON to w and flushes it; false
// once the client has gone.
func sseSender(w http.ResponseWriter, r *http.Request) func(v any) bool {
	fl, _ := w.(http.Flusher)
	return func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return r.Context().Err() == nil
	}
}
