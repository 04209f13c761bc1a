package gateway

import (
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/wire"
)

// A disaggregated request (route.Decision.Prefill, wire PROTOCOL.md 6.10)
// is one stream to the client from two engine streams: the prefill
// engine's hand-off frame gives the first token, the decode engine's
// stream everything after it. The decode GENERATE is sent before the
// first token goes out, so a decode engine that is gone before the
// hand-off costs the client nothing (the request is routed again); after
// it, a failure of either side (the prefill engine ending before the KV
// reached the decode engine, the decode engine failing or never
// answering within TransferTimeout) ends the client's stream with an
// in-stream error, cancels the other side and releases both
// reservations (Decision.Done releases the prefill side too). That wait
// for the decode side is no longer than the prefill engine keeps the KV
// (route.HandoffDeadline): a transfer that never lands (a lost RDMA
// read, a decode engine that hangs) must not outlast it; the decode
// GENERATE carries it as its deadline.

// prefillEngineHeader names the prefill engine of a disaggregated
// response, beside x-kvgate-engine (the decode engine).
const prefillEngineHeader = "x-kvgate-prefill-engine"

// split is one attempt at a disaggregated request.
type split struct {
	g        *Gateway
	req      *genRequest
	gen      *wire.Generate // the request's own GENERATE
	d, pd    *route.Decision
	ps, ds   *engine.Stream
	a        *attempt // the client's stream; set at the hand-off
	obs      *attemptObs
	released bool // the prefill side is released: its events are ignored
	// counted: the transfer's outcome is in the metrics (transferEnded).
	counted bool
}

// Outcomes of a hand-off's KV transfer (kvgate_disagg_transfers_total):
// the decode engine's first frame came (ok); the prefill engine ended, or
// the decode engine failed, before it (failed); it did not come within
// the transfer timeout (timeout); the client left first (cancelled).
const (
	transferOK        = "ok"
	transferFailed    = "failed"
	transferTimeout   = "timeout"
	transferCancelled = "cancelled"
)

// observeDisagg counts a decision of a request the router weighed
// splitting for (route.Router.WeighsSplit).
func (g *Gateway) observeDisagg(rr *route.Request, d *route.Decision) {
	if g.Metrics == nil || !g.Router.WeighsSplit(rr) {
		return
	}
	mode := "aggregated"
	if d.Prefill != nil {
		mode = "split"
	}
	g.Metrics.disaggDecisions.WithLabelValues(mode).Inc()
}

// transferEnded counts the outcome of the transfer once, if one started
// (the decode GENERATE went out) and it is not counted yet.
func (sp *split) transferEnded(outcome string) {
	if sp.counted || sp.ds == nil {
		return
	}
	sp.counted = true
	if m := sp.g.Metrics; m != nil {
		m.disaggTransfers.WithLabelValues(outcome).Inc()
	}
}

// attemptSplit runs one attempt of a disaggregated decision d: the
// prefill side on d.Prefill's engine, then the decode side on d's.
func (g *Gateway) attemptSplit(req *genRequest, gen *wire.Generate, d *route.Decision, out sink) (status int, retry bool, err error) {
	defer d.Done() // both sides; idempotent
	pd := d.Prefill
	base, lora, ok := pd.Engine.ResolveWire(req.Model)
	if !ok {
		return 0, true, engine.ErrNotReady
	}
	pgen := *gen
	pgen.Model, pgen.LoRAID, pgen.DPRank = base, lora, pd.WireRank()
	pgen.Flags |= wire.GenHandoff
	pgen.Handoff = wire.Handoff{Side: wire.HandoffPrefill, DeadlineMillis: uint32(route.HandoffDeadline / time.Millisecond),
		Peer: []byte(d.Engine.Info().ID)}
	sp := &split{g: g, req: req, gen: gen, d: d, pd: pd, obs: req.x.startAttempt(&pgen, pd)}
	defer func() { sp.obs.end(status, retry, err, sp.completion()) }()
	if sp.ps, err = pd.Engine.Generate(&pgen); err != nil {
		if retryable(err) {
			return 0, true, err
		}
		return req.fail(out, engineError(err)), false, nil
	}
	defer func() {
		if p := recover(); p != nil {
			sp.cancel(wire.CancelClientGone)
			panic(p)
		}
	}()
	if status, retry, err, done := sp.awaitHandoff(out); done {
		return status, retry, err
	}
	return sp.follow()
}

func (sp *split) completion() int {
	if sp.a == nil {
		return 0
	}
	return sp.a.completion()
}

// cancel stops both sides (those still open).
func (sp *split) cancel(reason wire.CancelReason) {
	if !sp.released {
		sp.ps.Cancel(reason)
	}
	if sp.ds != nil {
		sp.ds.Cancel(reason)
	}
}

// awaitHandoff waits for the prefill side's first frame and starts the
// decode side on its hand-off; done says the attempt is over (a retry, a
// failure, or a request the first token finished).
func (sp *split) awaitHandoff(out sink) (status int, retry bool, err error, done bool) {
	g, req := sp.g, sp.req
	timeout := time.NewTimer(g.FirstTokenTimeout)
	defer timeout.Stop()
	for {
		select {
		case <-sp.ps.Ready():
		case <-out.goneC():
			sp.ps.Cancel(wire.CancelClientGone)
			return out.gone(), false, nil, true
		case <-timeout.C:
			sp.ps.Cancel(wire.CancelTimeout)
			return req.fail(out, &api.Error{Status: 504, Message: "no first token from the prefill engine in time"}), false, nil, true
		}
		evs := sp.ps.Take()
		if len(evs) == 0 {
			continue
		}
		ev := evs[0]
		switch {
		case ev.Err != nil && retryable(ev.Err):
			return 0, true, ev.Err, true
		case ev.Err != nil:
			return req.fail(out, engineError(ev.Err)), false, nil, true
		case ev.KVTransfer == nil:
			// The first token ended the request (or the engine kept
			// nothing): it is the whole answer, from the prefill engine.
			a := sp.g.newAttempt(req, sp.pd, sp.ps, out, sp.obs)
			sp.a = a
			if ev.Last {
				setPrefillHeader(out, sp.pd)
				status, retry, err, _ := g.handle(a, ev)
				return status, retry, err, true
			}
			sp.ps.Cancel(wire.CancelClientGone)
			return req.fail(out, &api.Error{Status: 502, Message: "prefill engine answered a hand-off without its kv_transfer"}), false, nil, true
		}
		return sp.handOff(out, ev)
	}
}

// handOff sends the decode GENERATE, then the first token to the client.
func (sp *split) handOff(out sink, ev engine.Event) (status int, retry bool, err error, done bool) {
	g, req := sp.g, sp.req
	sp.pd.FirstToken() // its KV is now held for the decode engine
	base, lora, ok := sp.d.Engine.ResolveWire(req.Model)
	if !ok {
		sp.ps.Cancel(wire.CancelRerouted)
		return 0, true, engine.ErrNotReady, true
	}
	dgen := *sp.gen
	dgen.Model, dgen.LoRAID, dgen.DPRank = base, lora, sp.d.WireRank()
	dgen.Prompt = wire.TokensOf(append(append(make([]uint32, 0, len(req.tokens)+1), req.tokens...), ev.Tokens[:1]...))
	if dgen.MaxTokens > 0 {
		dgen.MaxTokens--
	}
	if dgen.Sampling.MinTokens > 0 {
		dgen.Sampling.MinTokens--
	}
	dgen.KVTransfer = ev.KVTransfer
	dgen.Flags |= wire.GenHandoff
	dgen.Handoff = wire.Handoff{Side: wire.HandoffDecode, DeadlineMillis: uint32(max(g.transferTimeout()/time.Millisecond, 1)),
		Peer: []byte(sp.pd.Engine.Info().ID)}
	if dgen.Flags&wire.GenTrace != 0 && sp.d.Engine.Features()&wire.FeatureTrace == 0 {
		dgen.Flags &^= wire.GenTrace
		dgen.Trace = wire.Trace{}
	}
	if sp.ds, err = sp.d.Engine.Generate(&dgen); err != nil {
		sp.ps.Cancel(wire.CancelRerouted)
		if retryable(err) {
			return 0, true, err, true // nothing reached the client
		}
		return req.fail(out, engineError(err)), false, nil, true
	}
	sp.a = g.newAttempt(req, sp.d, sp.ds, out, sp.obs)
	setPrefillHeader(out, sp.pd)
	ev.KVTransfer = nil
	if status, retry, err, done := g.handle(sp.a, ev); done { // the first token, to the client
		sp.transferEnded(transferCancelled)
		sp.cancel(wire.CancelClientGone)
		return status, retry, err, true
	}
	return 0, false, nil, false
}

// follow streams the decode side to its end, releasing the prefill side
// once the decode engine's first frame says the KV arrived.
func (sp *split) follow() (status int, retry bool, err error) {
	g, a := sp.g, sp.a
	transfer := time.NewTimer(g.transferTimeout())
	defer transfer.Stop()
	for {
		select {
		case <-sp.ds.Ready():
		case <-sp.prefillReady():
			for _, ev := range sp.ps.Take() {
				if ev.Last { // before the release: the prefill engine died or dropped the KV
					sp.transferEnded(transferFailed)
					sp.released = true
					sp.ds.Cancel(wire.CancelRerouted)
					sp.d.Done() // both sides, before the client can see the end (as handle does)
					return sp.req.fail(a.out, &api.Error{Status: 502,
						Message: "prefill engine " + sp.pd.Engine.Info().ID + " ended before its KV reached the decode engine"}), false, nil
				}
			}
			continue
		case <-a.out.goneC():
			sp.transferEnded(transferCancelled) // after the transfer's end: counted already
			sp.cancel(wire.CancelClientGone)
			return a.out.gone(), false, nil
		case <-transfer.C:
			if !sp.released {
				sp.transferEnded(transferTimeout)
				sp.cancel(wire.CancelTimeout)
				sp.d.Done() // both sides, before the client can see the end (as handle does)
				return sp.req.fail(a.out, &api.Error{Status: 504, Message: "the KV transfer from " + sp.pd.Engine.Info().ID +
					" to " + sp.d.Engine.Info().ID + " did not complete in time"}), false, nil
			}
			continue
		}
		evs := sp.ds.Take()
		for _, ev := range evs {
			if ev.Err != nil {
				sp.transferEnded(transferFailed) // before the first frame (else counted already)
			}
			if ev.Err == nil {
				sp.transferEnded(transferOK)
				sp.release()
				ev.First = false // the client's first token came from the prefill side
				if ev.Last {
					ev.PromptTokens, ev.CompletionTokens = uint32(len(sp.req.tokens)), ev.CompletionTokens+1
				}
			}
			if status, retry, err, done := g.handle(a, ev); done {
				sp.cancel(wire.CancelRerouted)
				return status, retry, err
			}
		}
		sp.ds.Release(evs)
	}
}

// transferTimeout is how long a hand-off waits for the decode engine's
// first frame (Gateway.TransferTimeout).
func (g *Gateway) transferTimeout() time.Duration {
	t := g.TransferTimeout
	if t <= 0 {
		t = g.FirstTokenTimeout
	}
	return min(t, route.HandoffDeadline)
}

// prefillReady is the prefill stream's signal until it is released.
func (sp *split) prefillReady() <-chan struct{} {
	if sp.released {
		return nil
	}
	return sp.ps.Ready()
}

// release ends the prefill side: the decode engine has the KV.
func (sp *split) release() {
	if sp.released {
		return
	}
	sp.released = true
	sp.ps.Cancel(wire.CancelRerouted)
	sp.pd.Done()
}

// setPrefillHeader names the prefill engine on a client's response.
func setPrefillHeader(out sink, pd *route.Decision) {
	if o, ok := out.(*output); ok {
		o.w.Header().Set(prefillEngineHeader, pd.Engine.Info().ID)
	}
}
