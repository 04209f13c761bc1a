package vllmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"time"
)

// A fake started WithNIXL is one half of vLLM's disaggregated serving with
// the NixlConnector, as vLLM's toy proxy drives it
// (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py at
// 030ea52effcb05071543c8c42b8f0145e94cee43), and it checks what the
// proxy and vLLM's models would (vllm/entrypoints/openai/completion/
// protocol.py at 002032ee2b18e1f7bd924ec47b62504ba3866063; the
// connector's request_finished and update_state_after_alloc in
// vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py at
// 002a1057e9ae674d7bdc9c4be95bc29d65d2e808):
//
//   - a prefill (producer) instance takes non-streamed requests of
//     max_tokens 1, min_tokens at most 1 and no stream_options, whose
//     kv_transfer_params are exactly the proxy's six fields; it answers
//     one token and, when the request was length-capped, the params
//     request_finished returns, and holds the prompt's blocks until the
//     decode instance reads them or its keep timeout passes
//     (VLLM_NIXL_ABORT_REQUEST_TIMEOUT);
//   - a decode (consumer) instance takes a streamed request whose
//     kv_transfer_params are exactly what its prefill peer returned and
//     not yet read, for that request's prompt; it reads the blocks (the
//     peer frees them), caches them as its own (KV events) and streams
//     the tokens an aggregated instance would, the first one included.
//
// Where vLLM would only log a bad parameter (update_state_after_alloc
// warns and recomputes), the fake answers 400 naming it, so that a test
// sees the bridge's mistake.

// KVRole is a fake's part in disaggregated serving (vLLM's kv_role).
type KVRole int

// KV roles.
const (
	KVProducer KVRole = 1 // prefill instance
	KVConsumer KVRole = 2 // decode instance
)

// NIXLFault makes a NIXL fake fail as a test asks.
type NIXLFault struct {
	// Status, non-zero, is the status every completion is refused with.
	Status int
	// SampleOther makes a decode instance's first token differ from its
	// prefill peer's, as unseeded sampling may.
	SampleOther bool
	// DieAfter, non-zero, makes a decode instance drop the connection
	// after streaming that many tokens, as a crashed server does.
	DieAfter int
	// Stall makes a decode instance wait for a KV that never arrives: it
	// answers a transfer's headers and then nothing (SSE comments only)
	// until the client goes away.
	Stall bool
}

type nixlState struct {
	role     KVRole
	engineID string
	keep     time.Duration
	peer     *Fake // a decode instance's prefill instance
	held     map[string]heldKV
	issued   int
	fault    NIXLFault
	reads    int
}

// heldKV is a prefill request's blocks kept for the decode instance.
type heldKV struct {
	params  map[string]any
	prompt  []uint32
	expires time.Time
}

// WithNIXL makes the fake a NixlConnector instance of role, with
// engineID as its kv_transfer_config engine_id, keeping prefilled blocks
// for keep (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT; 0: 480 s).
func WithNIXL(role KVRole, engineID string, keep time.Duration) Option {
	return func(o *options) {
		if keep == 0 {
			keep = 480 * time.Second
		}
		o.nixl = &nixlState{role: role, engineID: engineID, keep: keep, held: map[string]heldKV{}}
	}
}

// ReadFrom makes f, a decode instance, read its KV from prefill.
func (f *Fake) ReadFrom(prefill *Fake) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nixl.peer = prefill
}

// SetNIXLFault sets how the fake fails from now on.
func (f *Fake) SetNIXLFault(fault NIXLFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nixl.fault = fault
}

// Held returns the requests whose blocks a prefill instance keeps (not
// read, not expired).
func (f *Fake) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, h := range f.nixl.held {
		if time.Now().Before(h.expires) {
			n++
		}
	}
	return n
}

// Reads returns the transfers a decode instance took.
func (f *Fake) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nixl.reads
}

// remoteDecodeParams are the proxy's prefill kv_transfer_params.
var remoteDecodeParams = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
	"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}

// nixlServe handles the connector's part of a completion: a prefill
// instance answers it whole; a decode instance checks and takes the
// transfer, then lets completions stream. It reports whether it answered.
func (f *Fake) nixlServe(w http.ResponseWriter, body map[string]any, prompt []uint32) bool {
	f.mu.Lock()
	n := f.nixl
	var fault NIXLFault
	if n != nil {
		fault = n.fault
	}
	f.mu.Unlock()
	switch {
	case n == nil:
		return false
	case fault.Status != 0:
		typ := "InternalServerError"
		if fault.Status < 500 {
			typ = "BadRequestError"
		}
		vllmError(w, fault.Status, typ, "fake fault")
		return true
	case n.role == KVProducer:
		if msg := checkPrefill(body); msg != "" {
			vllmError(w, http.StatusBadRequest, "BadRequestError", msg)
			return true
		}
		f.prefill(w, body, prompt)
		return true
	}
	if _, ok := body["kv_transfer_params"]; !ok {
		return false // an ordinary request (the bridge's continuation)
	}
	if fault.Stall {
		stall(w)
		return true
	}
	if msg := f.takeTransfer(body, prompt); msg != "" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", msg)
		return true
	}
	return false
}

// checkPrefill says what is wrong with a prefill request, "" if nothing.
func checkPrefill(body map[string]any) string {
	switch {
	case body["stream"] != false:
		return "prefill: stream must be false"
	case hasKey(body, "stream_options"):
		return "prefill: stream_options sent (the proxy deletes them)"
	case body["max_tokens"] != float64(1):
		return fmt.Sprintf("prefill: max_tokens %v, want 1", body["max_tokens"])
	case num(body["min_tokens"]) > 1:
		return fmt.Sprintf("min_tokens must be less than or equal to max_tokens=1, got %v.", body["min_tokens"])
	case hasKey(body, "kv_transfer_params") && !reflect.DeepEqual(body["kv_transfer_params"], remoteDecodeParams):
		return fmt.Sprintf("prefill: kv_transfer_params %v, want the proxy's %v", body["kv_transfer_params"], remoteDecodeParams)
	}
	return ""
}

// prefill answers a non-streamed completion of one token as vLLM's
// CompletionResponse, with the connector's kv_transfer_params when the
// request asked for a remote decode and its token did not stop it.
func (f *Fake) prefill(w http.ResponseWriter, body map[string]any, prompt []uint32) {
	cached := f.admit("", prompt)
	tok := generated(prompt, 1)[0]
	finish := "length"
	if ids, _ := body["stop_token_ids"].([]any); slices.Contains(ids, any(float64(tok))) && body["ignore_eos"] != true {
		finish = "stop"
	}
	var params map[string]any
	if hasKey(body, "kv_transfer_params") && finish == "length" {
		f.mu.Lock()
		n := f.nixl
		n.issued++
		reqID := fmt.Sprintf("cmpl-%v-0", body["request_id"])
		blocks := []any{}
		for i := 0; i < (len(prompt)+f.BlockSize-1)/f.BlockSize; i++ {
			blocks = append(blocks, float64(n.issued*1000+i))
		}
		params = map[string]any{"do_remote_prefill": true, "do_remote_decode": false, "remote_block_ids": blocks,
			"remote_engine_id": n.engineID, "remote_request_id": reqID, "remote_host": "127.0.0.1", "remote_port": float64(5600), "tp_size": float64(1)}
		n.held[reqID] = heldKV{params: params, prompt: slices.Clone(prompt), expires: time.Now().Add(n.keep)}
		f.mu.Unlock()
	}
	choice := map[string]any{"index": 0, "text": fmt.Sprintf("<%d>", tok), "logprobs": nil, "finish_reason": finish,
		"stop_reason": nil, "token_ids": []uint32{tok}, "prompt_token_ids": nil}
	if lp, ok := body["logprobs"].(float64); ok {
		choice["logprobs"] = fakeLogprobs(tok, int(lp), body["return_tokens_as_token_ids"] == true)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "cmpl-fake", "object": "text_completion", "created": time.Now().Unix(),
		"model": f.Model, "choices": []any{choice}, "kv_transfer_params": params,
		"usage": map[string]any{"prompt_tokens": len(prompt), "completion_tokens": 1, "total_tokens": len(prompt) + 1,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
}

// takeTransfer checks a decode request's kv_transfer_params against what
// the prefill peer issued and still holds, and reads the blocks (the peer
// frees them); it says what is wrong, "" if nothing.
func (f *Fake) takeTransfer(body map[string]any, prompt []uint32) string {
	if body["stream"] != true {
		return "decode: the proxy streams the decode request"
	}
	params, ok := body["kv_transfer_params"].(map[string]any)
	if !ok {
		return "kv_transfer_params: Input should be a valid dictionary"
	}
	f.mu.Lock()
	peer := f.nixl.peer
	f.mu.Unlock()
	if peer == nil {
		return "decode: no prefill instance to read from"
	}
	reqID, _ := params["remote_request_id"].(string)
	peer.mu.Lock()
	h, held := peer.nixl.held[reqID]
	peer.mu.Unlock()
	switch {
	case !held || time.Now().After(h.expires):
		return fmt.Sprintf("kv_transfer_params: prefill request %q not held (never issued, read already, or expired)", reqID)
	case !reflect.DeepEqual(params, h.params):
		return fmt.Sprintf("kv_transfer_params %v: not what the prefill returned (%v); keys %v", params, h.params, keys(params))
	case !slices.Equal(prompt, h.prompt):
		return fmt.Sprintf("decode: prompt of %d tokens, the prefill's had %d: the remote blocks cover the prefill's prompt only", len(prompt), len(h.prompt))
	}
	peer.mu.Lock()
	delete(peer.nixl.held, reqID) // the NIXL read's notification frees them
	peer.mu.Unlock()
	f.admit("", prompt) // the read blocks are cached as computed here
	f.mu.Lock()
	f.nixl.reads++
	f.mu.Unlock()
	return ""
}

// nixlTokens are the tokens a decode instance streams: the aggregated
// ones, the first changed when SampleOther.
func (f *Fake) nixlTokens(body map[string]any, toks []uint32) []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nixl != nil && f.nixl.fault.SampleOther && hasKey(body, "kv_transfer_params") && len(toks) > 0 {
		toks[0]++
	}
	return toks
}

// nixlDies drops the connection of a decode request before its token i
// when DieAfter says so, and reports whether it did.
func (f *Fake) nixlDies(w http.ResponseWriter, i int) bool {
	f.mu.Lock()
	die := f.nixl != nil && f.nixl.fault.DieAfter > 0 && i == f.nixl.fault.DieAfter
	f.mu.Unlock()
	if !die {
		return false
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
		}
	}
	return true
}

// stall streams nothing but SSE comments until the client is gone (or a
// minute passed), as a decode instance whose KV never arrives.
func stall(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	for range 12000 {
		if _, err := fmt.Fprint(w, ": waiting for the KV\n\n"); err != nil || fl == nil {
			return
		}
		fl.Flush()
		time.Sleep(5 * time.Millisecond) // the client's leaving shows as a failed write
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func num(v any) float64 { f, _ := v.(float64); return f }

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
