package vllm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Prefill/decode disaggregation (wire PROTOCOL.md 6.10) through vLLM's KV
// connector API, as vLLM's own proxy drives it
// (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py at
// 030ea52effcb05071543c8c42b8f0145e94cee43, send_request_to_service and
// _handle_completions):
//
//   - A bridge of role prefill (disagg_prefill.go) sends a prefill-side
//     GENERATE as a non-streamed completion with max_tokens 1, no
//     stream_options, min_tokens at most 1 (vLLM refuses min_tokens over
//     max_tokens; the proxy drops it) and kv_transfer_params
//     {"do_remote_decode": true, "do_remote_prefill": false,
//     "remote_engine_id": null, "remote_block_ids": null, "remote_host":
//     null, "remote_port": null}. vLLM answers the first token and, in the
//     response's kv_transfer_params (CompletionResponse,
//     vllm/entrypoints/openai/completion/protocol.py at
//     002032ee2b18e1f7bd924ec47b62504ba3866063, filled from the request
//     output by completion/serving.py at 030ea52), what NixlConnector's
//     request_finished returns for a length-capped request:
//     do_remote_prefill true, do_remote_decode false, remote_block_ids,
//     remote_engine_id, remote_request_id, remote_host, remote_port,
//     tp_size (nixl_connector.py at
//     002a1057e9ae674d7bdc9c4be95bc29d65d2e808). Those bytes, verbatim,
//     are the HANDOFF frame's kv_transfer. A first token that ends the
//     request (EOS, a stop token: not length-capped) makes vLLM keep
//     nothing and return null params: the bridge answers FIRST|LAST.
//   - vLLM, not the bridge, keeps the blocks: until the decode instance's
//     NIXL read notifies it, or VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes
//     (NixlConnectorWorker.get_finished at 002a105; vllm/envs.py: 480 s
//     by default in current vLLM, 120 s in older ones such as
//     001f69f8b52e0803c910525974d17010814947ad). vLLM has no
//     API to free them sooner: the prefill request has finished, and an
//     abort of a finished request is a no-op. So a CANCEL after the
//     hand-off ends the wire stream at once (LAST, finish cancelled,
//     completion_tokens 1) while vLLM may still hold the blocks until its
//     timeout; a CANCEL before vLLM answered aborts the HTTP request,
//     which vLLM frees at once (request_finished: not length-capped ->
//     not processed). The bridge ends a kept stream with finish abort
//     at deadline_ms or at Disagg.KeepTimeout, whichever comes first.
//   - A bridge of role decode (disagg_decode.go) sends the decode side as
//     the proxy does: the original request, prompt included, with the
//     prefill's kv_transfer_params verbatim, streamed. vLLM's first token
//     says the KV arrived; when it has not come within the hand-off's
//     deadline_ms the bridge aborts the request and ends the stream with
//     ERROR STREAM_FAILED naming the prefill engine (PROTOCOL.md 6.10).
//     An error from vLLM before it (it refused the request, or failed
//     the transfer under kv_load_failure_policy fail) is the stream's
//     ERROR as for any request; the gateway ends the client's stream,
//     whose first token went out already, with an in-stream error.
//
// The open question: kvgate's decode GENERATE carries the prompt plus the
// prefill's first token (and max_tokens one less), but vLLM's decode
// instance cannot be given that prompt. Its NixlConnector scheduler
// (get_num_new_matched_tokens, update_state_after_alloc at 002a105)
// allocates blocks for the whole prompt it is given and reads the remote
// blocks into the ones it lacks, asserting that it has no more local
// blocks than remote ones (_read_blocks): a prompt one token longer
// crosses into a new block whenever the prefill's prompt fills its last
// block exactly, and vLLM fails that assertion. Once the KV has arrived,
// the scheduler sets num_computed_tokens to the blocks' tokens capped at
// the prompt, minus one when that is the whole prompt
// (_update_waiting_for_remote_kv, vllm/v1/core/sched/scheduler.py at
// 00024d314514900f361ad072af6931e403b7f589): vLLM recomputes the last
// prompt token and samples the first output token itself. So the decode
// bridge sends vLLM the original prompt (the GENERATE's minus its last
// token) with max_tokens and min_tokens one more, and drops the first
// token vLLM streams after checking it is the prefill's:
//
//   - greedy (temperature 0), or seeded: a seeded vLLM request samples
//     with its own torch.Generator, seeded with the request's seed when
//     the request joins the batch (GPUModelRunner._update_states,
//     vllm/v1/worker/gpu_model_runner.py at
//     4e1790651fc758c06c7a903dd4cd82364ac91b27), so both instances draw
//     their first sample from the same generator state and, given the
//     same logits, agree; the decode instance's later samples then use
//     the draws an aggregated run would. The logits can still differ in their last bits (different
//     batch shapes pick other kernels; scheduler.py's
//     _prefix_cache_aligned_split at 00024d3 describes 1-ULP differences
//     between a cache hit and a miss), so a rare mismatch remains.
//   - unseeded sampling: each instance draws its own sample, and they
//     disagree about as often as two draws differ.
//
// On a mismatch (counted, kvgate_bridge_disagg_first_token_mismatches_total,
// and logged) the bridge aborts vLLM's stream before anything of it
// reached the router and continues from the prefill's token: an ordinary
// completion of the GENERATE as sent (prompt plus the first token,
// max_tokens one less, no kv_transfer_params). vLLM has cached the
// transferred blocks by then (the same _update_waiting_for_remote_kv),
// so it recomputes only the prompt's last partial block and the first
// token. The client's stream stays one stream, no token duplicated or
// missing, every token conditioned on those before it; the cost of a
// mismatch is one extra short prefill. Presence and frequency penalties
// count the first token as prompt, not output, on that path.

// DefaultKeepTimeout is current vLLM's default
// VLLM_NIXL_ABORT_REQUEST_TIMEOUT: how long a prefill instance keeps a
// request's blocks for the decode instance to read (older versions: 120
// s; give kvgate-bridge --kv-keep-timeout what the engine runs with).
const DefaultKeepTimeout = 480 * time.Second

// Disagg is an Engine's part in disaggregated serving.
type Disagg struct {
	// Role is the part the bridge announces (wire.EngineRole.Features)
	// and takes: prefill, only prefill-side hand-offs (vLLM started with
	// a kv_producer connector); decode, decode sides and ordinary
	// requests (kv_consumer); both, ordinary requests only.
	Role wire.EngineRole
	// KeepTimeout is the prefill vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT;
	// a kept stream ends with finish abort when it passes, even inside
	// the router's deadline (0: DefaultKeepTimeout).
	KeepTimeout time.Duration

	// Handoffs counts prefill sides answered with a hand-off frame;
	// Mismatches decode sides whose first vLLM token was not the
	// prefill's (continued from the prefill's).
	Handoffs, Mismatches atomic.Uint64
}

// Features are the handshake features of the role (none for both).
func (d *Disagg) Features() wire.Feature { return d.Role.Features() }

func (d *Disagg) keep(g *wire.Generate) time.Duration {
	return min(time.Duration(g.Handoff.DeadlineMillis)*time.Millisecond, cmp.Or(d.KeepTimeout, DefaultKeepTimeout))
}

// generateHandoff serves a GENERATE with a hand-off section, and any
// GENERATE to a bridge of role prefill (which it refuses without one).
func (e *Engine) generateHandoff(k serve.Key, g *wire.Generate) error {
	if err := e.checkHandoff(k, g); err != nil {
		return err
	}
	body, rank, err := e.completionBody(g)
	if err != nil {
		return err
	}
	if g.Handoff.Side == wire.HandoffPrefill {
		p := prefillRequest(body, g)
		ctx := wire.WithTrace(e.reqs.Start(k), g)
		go e.runPrefill(ctx, k, p, rank, e.Disagg.keep(g))
		return nil
	}
	d := decodeRequest(body, g)
	ctx := wire.WithTrace(e.reqs.Start(k), g)
	go e.runDecode(ctx, k, d, rank)
	return nil
}

// checkHandoff refuses, as BAD_REQUEST naming why, what this bridge's
// role does not take and hand-offs it cannot drive through vLLM.
func (e *Engine) checkHandoff(k serve.Key, g *wire.Generate) error {
	role, side := e.Disagg.Role, g.Handoff.Side
	bad := func(format string, a ...any) error {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case g.Flags&wire.GenHandoff == 0:
		return bad("a prefill-only bridge takes only prefill-side hand-offs (GENERATE.handoff)")
	case role == wire.RoleBoth:
		return bad("handoff: this bridge serves no hand-off (--role both)")
	case e.SGLang != nil:
		return bad("handoff: the SGLang mode serves no hand-off")
	case e.Out != nil && e.Out.PeerFeatures(k.Conn)&wire.FeatureDisagg == 0:
		return bad("handoff: the router's HELLO did not announce DISAGG")
	case side == wire.HandoffPrefill && role != wire.RolePrefill:
		return bad("handoff: a decode-only bridge takes no prefill side")
	case side == wire.HandoffDecode && role != wire.RoleDecode:
		return bad("handoff: a prefill-only bridge takes no decode side")
	case g.MMItems.Len() > 0 || len(g.Guided) > 0:
		return bad("handoff: not with multimodal items or guided output")
	case g.LoRAID != 0 && e.Residency != nil:
		return bad("handoff: not with adapters loaded at run time (--lora-adapter)")
	case side == wire.HandoffPrefill && len(g.KVTransfer) > 0:
		return bad("handoff: a prefill side carries no kv_transfer")
	case side == wire.HandoffDecode && g.Prompt.Len() < 2:
		return bad("handoff: a decode side's prompt is the prefill's prompt and its first token (at least 2 tokens)")
	case side == wire.HandoffDecode && !isJSONObject(g.KVTransfer):
		return bad("handoff: kv_transfer is not vLLM's kv_transfer_params (a JSON object)")
	}
	return nil
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// DisaggCollectors are the hand-off metrics of e's role (none for both).
func DisaggCollectors(e *Engine) []prometheus.Collector {
	d := &e.Disagg
	switch d.Role {
	case wire.RolePrefill:
		return []prometheus.Collector{counter("disagg_handoffs_total", "Prefill sides answered with a hand-off (vLLM keeps the KV for the decode instance).",
			func() float64 { return float64(d.Handoffs.Load()) })}
	case wire.RoleDecode:
		return []prometheus.Collector{counter("disagg_first_token_mismatches_total", "Decode sides whose first vLLM token was not the prefill's, continued from the prefill's.",
			func() float64 { return float64(d.Mismatches.Load()) })}
	}
	return nil
}
