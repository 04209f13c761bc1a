package vllmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// A fake started with the SGLang encoding is a fake SGLang server, as
// ../sglang_api.go and ../sglang.go read SGLang's source: its cache is the
// fake's (pages of BlockSize tokens, --page-size), and it serves
//
//   - POST /generate: input_ids and sampling_params in; streamed as
//     data: {"text", "output_ids", "meta_info"} chunks then [DONE], every
//     id so far in each chunk, or only the new ones WithIncrementalStreaming;
//     not streamed, one such object. A sampling parameter SamplingParams
//     does not take fails the request (400, as its TypeError does here), a
//     prompt past the context length (the KV pool) is an error event in a
//     stream and a 400 without one;
//   - GET /get_server_info: the ServerArgs the bridge checks (page_size,
//     served_model_name, dp_size, kv_events_config, ...);
//   - GET /metrics: the scheduler's gauges under SGLang's names and labels,
//     two TP ranks exporting (--enable-metrics-for-all-schedulers), TP rank
//     1 first;
//
// and publishes its events as RadixCache does: one BlockStored or
// BlockRemoved per page, chained page by page. SGLangDP (sglang_dp.go) is
// a server of several DP-attention ranks.

// sglangState is the SGLang mode's own state; guarded by Fake.mu.
type sglangState struct {
	incremental  bool
	queued       int // what num_queue_reqs says (SetQueued)
	rids         int
	rank, dpSize int // this rank of a server with dpSize DP-attention ranks
}

// WithIncrementalStreaming makes a fake SGLang stream only the new ids in
// each chunk, as --incremental-streaming-output does.
func WithIncrementalStreaming() Option {
	return func(o *options) { o.incremental = true }
}

// SetQueued makes a fake SGLang's metrics say n requests wait in its queue.
func (f *Fake) SetQueued(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sgl.queued = n
}

func (f *Fake) sglangRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /generate", f.generate)
	mux.HandleFunc("GET /get_server_info", f.serverInfo)
	mux.HandleFunc("GET /metrics", f.sglangMetrics)
}

// samplingKeys are SamplingParams' keyword arguments the fake takes (a
// subset of sampling/sampling_params.py's).
var samplingKeys = map[string]bool{"max_new_tokens": true, "temperature": true, "top_p": true, "top_k": true, "min_p": true,
	"stop": true, "stop_token_ids": true, "ignore_eos": true, "sampling_seed": true, "min_new_tokens": true}

func readBody(r *http.Request) ([]byte, error) { return io.ReadAll(io.LimitReader(r.Body, 64<<20)) }

func sglangError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
	_, _ = w.Write(b)
}

func (f *Fake) generate(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	var req struct {
		Text           *string        `json:"text"`
		InputIDs       []uint32       `json:"input_ids"`
		SamplingParams map[string]any `json:"sampling_params"`
		Stream         bool           `json:"stream"`
		RID            string         `json:"rid"`
	}
	b, err := readBody(r)
	if err == nil {
		err = json.Unmarshal(b, &body)
	}
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil { // FastAPI's validation error, as http_server.py answers it
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"object": "error", "message": err.Error(), "type": "Bad Request", "param": nil, "code": 400})
		_, _ = w.Write(b)
		return
	}
	if len(req.InputIDs) == 0 {
		sglangError(w, http.StatusBadRequest, "Either text or input_ids should be provided.")
		return
	}
	maxNew := 128
	for k, v := range req.SamplingParams {
		if !samplingKeys[k] {
			sglangError(w, http.StatusBadRequest, fmt.Sprintf("SamplingParams.__init__() got an unexpected keyword argument '%s'", k))
			return
		}
		if n, ok := v.(float64); ok && k == "max_new_tokens" {
			maxNew = int(n)
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, Request{Model: f.Model, Prompt: req.InputIDs, Body: body})
	f.sgl.rids++
	rid, incremental := req.RID, f.sgl.incremental
	if rid == "" {
		rid = fmt.Sprintf("%032x", f.sgl.rids)
	}
	f.mu.Unlock()
	if limit := f.Capacity * f.BlockSize; len(req.InputIDs)+maxNew > limit {
		msg := fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion.",
			limit, len(req.InputIDs)+maxNew, len(req.InputIDs), maxNew)
		if !req.Stream {
			sglangError(w, http.StatusBadRequest, msg)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
		return
	}
	f.mu.Lock()
	f.running++
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	cached := f.admit("", req.InputIDs)
	ids := generated(req.InputIDs, maxNew)
	out := func(n int, from int) map[string]any {
		meta := map[string]any{"id": rid, "finish_reason": nil, "prompt_tokens": len(req.InputIDs), "weight_version": "default",
			"num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": n, "cached_tokens": cached}
		if n == maxNew {
			meta["finish_reason"] = map[string]any{"type": "length", "length": maxNew}
			meta["e2e_latency"] = 0.01
		}
		return map[string]any{"text": textOf(ids[from:n]), "output_ids": ids[from:n], "meta_info": meta}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out(maxNew, 0))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	for n := 1; n <= maxNew; n++ {
		from := 0
		if incremental {
			from = n - 1
		}
		b, _ := json.Marshal(out(n, from))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil || r.Context().Err() != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
}

// textOf is the fake's detokenization of ids.
func textOf(ids []uint32) string {
	var b strings.Builder
	for _, t := range ids {
		fmt.Fprintf(&b, "<%d>", t)
	}
	return b.String()
}

func (f *Fake) serverInfo(w http.ResponseWriter, _ *http.Request) {
	port := func(u string) string { return u[strings.LastIndexByte(u, ':')+1:] }
	events, _ := json.Marshal(map[string]any{"publisher": "zmq", "endpoint": "tcp://*:" + port(f.EventsURL),
		"replay_endpoint": "tcp://*:" + port(f.ReplayURL), "topic": ""})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"model_path": f.Model, "served_model_name": f.Model, "page_size": f.BlockSize,
		"tp_size": f.sgl.dpSize, "dp_size": f.sgl.dpSize, "enable_dp_attention": f.sgl.dpSize > 1, "kv_events_config": string(events), "enable_metrics": true,
		"enable_priority_scheduling": false, "schedule_low_priority_values_first": false,
		"max_total_num_tokens": f.Capacity * f.BlockSize, "version": "0.5.5"})
}

func (f *Fake) sglangMetrics(w http.ResponseWriter, _ *http.Request) {
	writeSGLangMetrics(w, []*Fake{f})
}

// writeSGLangMetrics writes the scheduler gauges of ranks, one fake per
// DP rank: with one rank, two TP ranks export (TP rank 1 first); with DP
// attention, each DP rank's scheduler exports under its dp_rank, its TP
// rank the DP rank's (one attention-TP rank each).
func writeSGLangMetrics(w http.ResponseWriter, ranks []*Fake) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	type stats struct{ running, queued, used int }
	st := make([]stats, len(ranks))
	for i, f := range ranks {
		f.mu.Lock()
		st[i] = stats{f.running, f.sgl.queued, len(f.cache)}
		f.mu.Unlock()
	}
	gauge := func(name, help string, v func(f *Fake, s stats) float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for i, f := range ranks {
			if f.sgl.dpSize > 1 {
				fmt.Fprintf(w, "%s{dp_rank=\"%d\",engine_type=\"unified\",model_name=%q,moe_ep_rank=\"%d\",pp_rank=\"0\",tp_rank=\"%d\"} %s\n",
					name, f.sgl.rank, f.Model, f.sgl.rank, f.sgl.rank, pyFloat(v(f, st[i])))
				continue
			}
			for _, tp := range []int{1, 0} {
				fmt.Fprintf(w, "%s{engine_type=\"unified\",model_name=%q,moe_ep_rank=\"%d\",pp_rank=\"0\",tp_rank=\"%d\"} %s\n", name, f.Model, tp, tp, pyFloat(v(f, st[i])))
			}
		}
	}
	gauge("sglang:num_running_reqs", "The number of running requests.", func(_ *Fake, s stats) float64 { return float64(s.running) })
	gauge("sglang:num_used_tokens", "The number of used tokens.", func(f *Fake, s stats) float64 { return float64(s.used * f.BlockSize) })
	gauge("sglang:token_usage", "The token usage.", func(f *Fake, s stats) float64 { return float64(s.used) / float64(f.Capacity) })
	gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", func(_ *Fake, s stats) float64 { return float64(s.queued) })
	gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
		func(f *Fake, _ stats) float64 { return float64(f.Capacity * f.BlockSize) })
}

// pyFloat spells v as Python's repr of a float does in prometheus_client's
// output ("4.0", "0.25").
func pyFloat(v float64) string {
	s := fmt.Sprint(v)
	if !strings.ContainsAny(s, ".eEN") {
		s += ".0"
	}
	return s
}

// perPage splits stored and removed events into one per page, as SGLang's
// RadixCache publishes them (each store's parent the page before it).
func perPage(evs []vllm.Event) []vllm.Event {
	var out []vllm.Event
	for _, ev := range evs {
		if ev.Kind == vllm.AllBlocksCleared || len(ev.BlockHashes) <= 1 {
			out = append(out, ev)
			continue
		}
		parent := ev.Parent
		for i, h := range ev.BlockHashes {
			p := ev
			p.BlockHashes, p.Parent = []vllm.Hash{h}, parent
			if ev.Kind == vllm.BlockStored {
				p.TokenIDs = ev.TokenIDs[i*ev.BlockSize : (i+1)*ev.BlockSize]
			}
			out = append(out, p)
			parent = h
		}
	}
	return out
}
