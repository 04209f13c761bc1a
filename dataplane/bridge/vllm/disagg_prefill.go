package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// remoteDecodeParams are the kv_transfer_params of a prefill request, as
// the toy proxy sends them (disagg.go): prefill here, decode elsewhere.
var remoteDecodeParams = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

// maxPrefillResponse bounds the non-streamed answer read from vLLM: one
// token, its logprobs and the transfer parameters (remote_block_ids grow
// with the prompt: 2 M blocks of 8 digits fit).
const maxPrefillResponse = 16 << 20

// transferRequest is a completion request with kv_transfer_params.
type transferRequest struct {
	*completionRequest
	KVTransferParams json.RawMessage `json:"kv_transfer_params,omitempty"`
}

// prefillRequest makes body, g's completion request, the prefill side:
// one token, not streamed, vLLM asked to keep the KV for a remote decode
// unless that one token is all the request wants.
func prefillRequest(body *completionRequest, g *wire.Generate) *transferRequest {
	body.Stream, body.StreamOptions, body.MaxTokens = false, nil, 1
	body.MinTokens = min(body.MinTokens, 1)
	p := &transferRequest{completionRequest: body}
	if g.MaxTokens != 1 {
		p.KVTransferParams = remoteDecodeParams
	}
	return p
}

// prefillResponse is vLLM's non-streamed CompletionResponse (the fields
// the bridge reads): choices and usage as a chunk's, and the transfer
// parameters.
type prefillResponse struct {
	chunk
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
}

// runPrefill posts the prefill request and answers its first token: in a
// hand-off frame, the stream then kept open until CANCEL (finish
// cancelled) or keep passes (finish abort), or as the stream's only frame
// when vLLM kept nothing.
func (e *Engine) runPrefill(ctx context.Context, k serve.Key, body *transferRequest, rank int, keep time.Duration) {
	defer e.reqs.Done(k)
	resp, ok := e.post(ctx, k, "/v1/completions", body, rank)
	if !ok {
		return
	}
	var r prefillResponse
	err := json.NewDecoder(io.LimitReader(resp.Body, maxPrefillResponse)).Decode(&r)
	resp.Body.Close()
	if err == nil {
		err = r.check()
	}
	if err != nil {
		bridgeutil.Broken(e.Out, ctx, k, wire.CodeStreamFailed, "prefill engine's answer: "+err.Error())
		return
	}
	m, err := r.first(body.topN())
	if err != nil {
		e.Out.Fail(k, wire.CodeStreamFailed, "prefill engine's answer: "+err.Error())
		return
	}
	if r.lostParams(body) {
		e.Out.Fail(k, wire.CodeStreamFailed, "prefill engine returned no kv_transfer_params for a length-capped request: is vLLM started with --kv-transfer-config (NixlConnector, kv_role kv_producer or kv_both)?")
		return
	}
	if !r.handsOff(body) {
		m.Flags |= wire.TokLast
		m.Finish, m.PromptTokens, m.CompletionTokens = finishOf(derefOr(r.Choices[0].FinishReason)), r.usage(), uint32(m.Tokens.Len())
		e.Out.Deliver([]serve.Tokens{{Key: k, Msg: m}})
		return
	}
	m.Flags |= wire.TokHandoff
	m.KVTransfer = r.KVTransferParams
	e.Disagg.Handoffs.Add(1)
	e.Out.Deliver([]serve.Tokens{{Key: k, Msg: m}})
	t := time.NewTimer(keep)
	defer t.Stop()
	finish := wire.FinishAbort
	select {
	case <-ctx.Done():
		finish = wire.FinishCancelled
	case <-t.C:
		e.Log.Info("hand-off not released in time: ending the prefill stream; vLLM frees the blocks at its own timeout", "request", body.RequestID, "keep", keep)
	}
	e.Out.Deliver([]serve.Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokLast, Finish: finish, PromptTokens: r.usage(), CompletionTokens: 1}}})
}

// check refuses an answer that is no completion of one choice.
func (r *prefillResponse) check() error {
	if msg, ok := r.engineError(); ok {
		return errString(msg)
	}
	if len(r.Choices) != 1 || len(r.Choices[0].TokenIDs) > 1 {
		return errString("not one choice of at most one token")
	}
	if len(r.KVTransferParams) > 0 && !bytes.Equal(r.KVTransferParams, []byte("null")) && !isJSONObject(r.KVTransferParams) {
		return errString("kv_transfer_params is not a JSON object")
	}
	return nil
}

// first is the answer's FIRST frame: its token (none when vLLM stopped
// before one) with logprobs when topN >= 0, and the cached tokens.
func (r *prefillResponse) first(topN int) (wire.TokensMsg, error) {
	ch := &r.Choices[0]
	if ch.Text != "" && len(ch.TokenIDs) == 0 {
		return wire.TokensMsg{}, noTokenIDs(&r.chunk)
	}
	m := wire.TokensMsg{Flags: wire.TokFirst, Tokens: wire.TokensOf(ch.TokenIDs)}
	if u := r.Usage; u != nil && u.PromptTokensDetails != nil {
		m.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if topN >= 0 && len(ch.TokenIDs) > 0 {
		entries, err := ch.Logprobs.entries(len(ch.TokenIDs), topN)
		if err != nil {
			return m, err
		}
		if m.Logprobs, err = wire.LogprobsOf(topN, entries); err != nil {
			return m, err
		}
		m.Flags |= wire.TokLogprobs
	}
	return m, nil
}

// usage is the answer's prompt tokens.
func (r *prefillResponse) usage() uint32 {
	if r.Usage == nil {
		return 0
	}
	return r.Usage.PromptTokens
}

// handsOff reports whether vLLM kept the KV for a remote decode: params
// came back for a request that asked for them, and its one token did not
// end it.
func (r *prefillResponse) handsOff(body *transferRequest) bool {
	p := r.KVTransferParams
	return body.KVTransferParams != nil && len(p) > 0 && !bytes.Equal(p, []byte("null")) && string(p) != "{}" &&
		len(r.Choices[0].TokenIDs) == 1 && finishOf(derefOr(r.Choices[0].FinishReason)) == wire.FinishLength
}

// lostParams reports an engine that ignored kv_transfer_params: it
// stopped at max_tokens 1 as asked yet kept nothing for the decode side.
func (r *prefillResponse) lostParams(body *transferRequest) bool {
	return body.KVTransferParams != nil && !r.handsOff(body) && len(r.Choices[0].TokenIDs) == 1 &&
		finishOf(derefOr(r.Choices[0].FinishReason)) == wire.FinishLength
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type errString string

func (e errString) Error() string { return string(e) }
