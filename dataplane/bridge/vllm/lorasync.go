package vllm

import (
	"context"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Sync reads which adapters the engine has registered (GET /v1/models:
// the cards whose parent is the base model) and, when that is not what
// the residency held, takes it as the truth and announces every rank's
// residency: the first call, an engine that restarted without its runtime
// adapters, one loaded by another client. Registered adapters the bridge
// was not told of hold slots without being announced. A listing that
// raced a load or unload of the bridge's own is dropped; the next one
// counts.
func (r *Residency) Sync(ctx context.Context) error {
	r.mu.Lock()
	before := r.changes
	r.mu.Unlock()
	cards, err := FetchModels(ctx, r.Client, r.URL)
	if err != nil {
		return err
	}
	names := ResidentAdapters(cards, r.Model)
	r.amu.Lock()
	defer r.amu.Unlock()
	r.mu.Lock()
	if r.changes != before || len(r.loading) > 0 {
		r.mu.Unlock()
		return nil
	}
	next, foreign := map[uint32]*residentAdapter{}, 0
	for _, n := range names {
		id, ok := r.byName[n]
		if !ok {
			foreign++
			continue
		}
		if s := r.resident[id]; s != nil {
			next[id] = s
		} else {
			r.tick++
			next[id] = &residentAdapter{lastUse: r.tick}
		}
	}
	changed := !r.synced || foreign != r.foreign || len(next) != len(r.resident)
	for id := range next {
		if r.resident[id] == nil {
			changed = true
		}
	}
	r.resident, r.foreign, r.synced = next, foreign, true
	if changed {
		r.signal() // a slot may have come free
	}
	r.mu.Unlock()
	if changed {
		r.Log.Info("LoRA residency read from the engine", "resident", len(next), "unknown_to_the_bridge", foreign)
		r.announceResident()
	}
	return nil
}

// Vanished takes note that the engine answered a request for adapter
// name as a model it does not serve (404) although the residency held it:
// the engine lost it (a restart the events did not show yet). It forgets
// the adapter, announces every rank's residency, and reports whether it
// held it; the next request for it loads it again.
func (r *Residency) Vanished(name string) bool {
	r.amu.Lock()
	defer r.amu.Unlock()
	r.mu.Lock()
	id, ok := r.byName[name]
	held := ok && r.resident[id] != nil && r.byID[id].Source != ""
	if held {
		delete(r.resident, id)
		r.changes++
		r.signal()
	}
	r.mu.Unlock()
	if held {
		r.Log.Warn("LoRA adapter no longer registered on the engine; loading it again on its next request", "adapter", name)
		r.announceResident()
	}
	return held
}

// Poll runs Sync every interval until ctx ends.
func (r *Residency) Poll(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			r.Log.Debug("reading the engine's adapters", "url", r.URL, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runAdapter streams a completion for LoRA adapter id: it holds the
// adapter (loading it when it is not resident) for the request's whole
// life. A load that fails ends the stream with UNKNOWN_LORA and vLLM's
// message.
func (e *Engine) runAdapter(ctx context.Context, k serve.Key, id uint32, body *completionRequest, rank int) {
	if err := e.Residency.Acquire(ctx, id); err != nil {
		bridgeutil.Broken(e.Out, ctx, k, wire.CodeUnknownLoRA, err.Error())
		e.reqs.Done(k)
		return
	}
	defer e.Residency.Release(id)
	e.run(ctx, k, body, rank)
}
