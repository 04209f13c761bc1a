package vllm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// decodeSide is a decode-side GENERATE as vLLM is sent it (disagg.go):
// transfer, the original request with the prefill's kv_transfer_params;
// after, the GENERATE as sent, for continuing from the prefill's first
// token when vLLM samples another.
type decodeSide struct {
	transfer *transferRequest
	after    *completionRequest
	first    uint32 // the prefill's first token, the GENERATE's last prompt token
	// wait is how long vLLM's first token may take (the KV's arrival and
	// one step): the hand-off's deadline_ms; peer the prefill engine.
	wait time.Duration
	peer string
}

// decodeRequest makes the decode side of g from body, g's completion
// request: the prompt without its last token (the prefill's first),
// max_tokens and min_tokens one more, kv_transfer verbatim.
func decodeRequest(body *completionRequest, g *wire.Generate) *decodeSide {
	t := *body
	n := len(body.Prompt) - 1
	t.Prompt = body.Prompt[:n:n]
	if t.MaxTokens > 0 {
		t.MaxTokens++
	}
	if t.MinTokens > 0 {
		t.MinTokens++
	}
	return &decodeSide{transfer: &transferRequest{completionRequest: &t, KVTransferParams: append([]byte(nil), g.KVTransfer...)},
		after: body, first: body.Prompt[n], wait: time.Duration(g.Handoff.DeadlineMillis) * time.Millisecond, peer: string(g.Handoff.Peer)}
}

// errFirstMismatch stops vLLM's stream at a first token other than the
// prefill's.
var errFirstMismatch = errors.New("vllm: the decode instance's first token is not the prefill's")

// runDecode streams the decode side: vLLM's tokens after its first, which
// it checks against the prefill's; on a mismatch, the continuation.
func (e *Engine) runDecode(ctx context.Context, k serve.Key, d *decodeSide, rank int) {
	defer e.reqs.Done(k)
	tctx, cancel := context.WithCancel(ctx)
	resp, ok := e.post(tctx, k, "/v1/completions", d.transfer, rank)
	if !ok {
		cancel()
		return
	}
	defer resp.Body.Close()
	s := relay{e: e, k: k, topN: d.transfer.topN()}
	drop := firstDrop{relay: &s, want: d.first}
	stop := time.AfterFunc(d.wait, func() {
		if drop.state.CompareAndSwap(kvAwaited, kvLate) {
			e.Out.Fail(k, wire.CodeStreamFailed, fmt.Sprintf("the KV from %s did not arrive within the hand-off's %v", d.peer, d.wait))
			cancel()
		}
	})
	end, err := decodeSSE(resp.Body, drop.chunk)
	stop.Stop()
	cancel() // a stream stopped at a mismatch is aborted, not read on
	if drop.state.Load() == kvLate {
		return // failed by the timer
	}
	if end == sseRefused && errors.Is(err, errFirstMismatch) {
		e.Disagg.Mismatches.Add(1)
		e.Log.Warn("decode instance sampled another first token than the prefill: continuing from the prefill's",
			"request", d.after.RequestID, "prefill_token", d.first, "decode_token", drop.got)
		e.run(ctx, k, d.after, rank) // ours to end: run's deferred Done is the same key's
		return
	}
	e.ended(ctx, k, end, err, func() {
		// Usage of the GENERATE as sent: its prompt holds the first token.
		s.prompt, s.completion = s.prompt+1, max(s.completion, 1)-1
		s.finish()
	})
}

// States of a decode side's KV (firstDrop.state): vLLM's first token
// says it arrived, unless the hand-off's deadline passed first.
const (
	kvAwaited int32 = iota
	kvArrived
	kvLate
)

// errKVLate stops a stream whose deadline passed before its first token.
var errKVLate = errors.New("vllm: the KV arrived after the hand-off's deadline")

// firstDrop passes a decode stream's chunks to relay without the first
// token, which must be want.
type firstDrop struct {
	relay *relay
	want  uint32
	got   uint32
	state atomic.Int32 // kvAwaited until the first token; the deadline's timer reads it too
}

func (d *firstDrop) chunk(c *chunk) error {
	if d.state.Load() != kvArrived {
		for i := range c.Choices {
			ch := &c.Choices[i]
			if len(ch.TokenIDs) == 0 {
				continue
			}
			if !d.state.CompareAndSwap(kvAwaited, kvArrived) {
				return errKVLate
			}
			d.got = ch.TokenIDs[0]
			if d.got != d.want {
				return errFirstMismatch
			}
			ch.TokenIDs = ch.TokenIDs[1:]
			if len(ch.TokenIDs) == 0 {
				ch.Text = ""
			}
			if l := ch.Logprobs; l != nil && len(l.TokenLogprobs) > 0 && len(l.TopLogprobs) > 0 {
				l.TokenLogprobs, l.TopLogprobs = l.TokenLogprobs[1:], l.TopLogprobs[1:]
				if len(l.Tokens) > 0 {
					l.Tokens = l.Tokens[1:]
				}
			}
			break
		}
	}
	return d.relay.chunk(c)
}
