package sim

import (
	"slices"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// StepResult is what one step did.
type StepResult struct {
	// Duration is the simulated GPU time of the step.
	Duration time.Duration
	Outputs  []Output
	// Events are the KV cache changes of the step, in order.
	Events                    []kvstore.Event
	PrefillTokens, DecodeSeqs int
	// Loads counts the blocks brought back into the GPU from each lower
	// tier (index kvstore.TierCPU, TierDisk).
	Loads [kvstore.NumTiers]int
}

type scheduled struct {
	r      *Request
	tokens int
	decode bool
}

// Step schedules one batch, runs it and returns what it produced.
func (c *Core) Step() StepResult { return c.stepAppend(nil) }

// stepAppend is Step with the outputs appended to outs (res.Outputs is
// outs then this step's outputs), so that a caller that collects several
// steps' outputs allocates nothing once outs has grown.
func (c *Core) stepAppend(outs []Output) StepResult {
	res := StepResult{Outputs: outs}
	budget := c.cfg.MaxBatchedTokens
	batch := c.batch[:0]
	defer func() { clear(batch); c.batch = batch[:0] }() // the array is the next step's

	// Running requests first, oldest first; make room by preempting the newest.
	for i := 0; i < len(c.running) && budget > 0; i++ {
		r := c.running[i]
		if r.loading > 0 {
			continue // its blocks are still on their way up from a lower tier
		}
		n := min(r.target-r.computed, budget)
		if !c.ensureBlocks(r, r.computed+n) {
			i = c.preemptFor(r, i)
			if i < 0 || c.running[i] != r || !c.ensureBlocks(r, r.computed+n) {
				break
			}
		}
		batch = append(batch, scheduled{r: r, tokens: n, decode: r.started && r.target-r.computed == 1})
		budget -= n
	}
	// Then admit waiting requests while budget and batch slots remain.
	admitted := 0
	for admitted < len(c.waiting) && budget > 0 && len(c.running) < c.cfg.MaxRunning {
		r := c.waiting[admitted]
		var loads [kvstore.NumTiers]int
		if !c.admit(r, budget, &loads) {
			break
		}
		admitted++
		c.running = append(c.running, r)
		for t, n := range loads {
			res.Loads[t] += n
		}
		if r.loading = max(c.startLoads(&loads), c.startTransfer(r)); r.loading > 0 { // startTransfer: disagg.go
			continue // computes once its blocks are up; the batch goes on meanwhile
		}
		n := min(r.target-r.computed, budget)
		batch = append(batch, scheduled{r: r, tokens: n})
		budget -= n
	}
	c.dropWaiting(admitted)
	if len(batch) == 0 {
		// Nothing to compute: wait for the first load to finish, if any.
		res.Duration = c.nextLoad()
		c.elapse(res.Duration)
		res.Events = c.blocks.takeEvents()
		return res
	}
	activeKV := 0
	for _, s := range batch {
		if s.decode {
			res.DecodeSeqs++
			activeKV += s.r.computed + 1
		} else {
			res.PrefillTokens += s.tokens
		}
	}
	res.Duration = c.cfg.Profile.StepTime(res.PrefillTokens, res.DecodeSeqs > 0, activeKV,
		c.cfg.GPUBlocks*c.cfg.BlockSize)
	c.elapse(res.Duration)
	for _, s := range batch {
		if out, ok := c.advance(s.r, s.tokens); ok {
			res.Outputs = append(res.Outputs, out)
		}
	}
	c.running = slices.DeleteFunc(c.running, func(r *Request) bool { return r.finished })
	res.Events = c.blocks.takeEvents()
	c.stats.Steps++
	c.stats.PrefillTokens += res.PrefillTokens
	c.stats.CPULoads += res.Loads[kvstore.TierCPU]
	c.stats.DiskLoads += res.Loads[kvstore.TierDisk]
	c.stats.Busy += res.Duration
	return res
}

// dropWaiting takes the first n waiting requests (admitted) off the queue,
// keeping its array: the queue does not walk through memory.
func (c *Core) dropWaiting(n int) {
	if n == 0 {
		return
	}
	m := copy(c.waiting, c.waiting[n:])
	clear(c.waiting[m:])
	c.waiting = c.waiting[:m]
}

// admit gives a waiting request its cached prefix and the blocks for its
// first chunk, adding the blocks it loads from each lower tier to loads; it
// returns false (nothing held, nothing loaded) when the pool cannot take it
// now.
func (c *Core) admit(r *Request, budget int, loads *[kvstore.NumTiers]int) bool {
	if c.hyb != nil {
		return c.admitHybrid(r, budget) // hybrid.go
	}
	bs := c.cfg.BlockSize
	limit := min(len(r.hashes), (len(r.tokens)-1)/bs) // at least one token is computed
	var loaded [kvstore.NumTiers]int
	for i := range c.blocks.heldRun(r.hashes[:limit]) {
		h := r.hashes[i]
		if b, ok := c.blocks.lookupGPU(h); ok {
			c.blocks.acquire(b)
			r.table = append(r.table, b)
			continue
		}
		tier, ok := c.blocks.lower(h)
		if !ok { // pushed out by the loads before it (a lower tier smaller than the run)
			break
		}
		b, ok := c.blocks.allocate()
		if !ok {
			break
		}
		parent, hasParent := c.parentOf(r, i)
		c.blocks.commit(b, h, parent, hasParent)
		r.table = append(r.table, b)
		loaded[tier]++
		c.blocks.raise(tier, h)
	}
	c.takeTransfer(r, limit) // disagg.go: a decode side's blocks from its prefill engine
	r.computed = len(r.table) * bs
	n := min(r.target-r.computed, budget)
	if !c.ensureBlocks(r, r.computed+n) {
		// The loaded blocks stay cached on the GPU (their events are out);
		// the time to load them is charged when the request is admitted.
		c.blocks.release(r.table)
		r.table, r.computed = nil, 0
		return false
	}
	for t, n := range loaded {
		loads[t] += n
	}
	c.markAdmitted(r)
	return true
}

func (c *Core) parentOf(r *Request, i int) (uint64, bool) {
	if i == 0 {
		return 0, false
	}
	return r.hashes[i-1], true
}

// ensureBlocks grows r's block table to hold tokens; false if the pool is out.
func (c *Core) ensureBlocks(r *Request, tokens int) bool {
	if c.hyb != nil {
		return c.hyb.ensure(c, r, tokens)
	}
	need := (tokens + c.cfg.BlockSize - 1) / c.cfg.BlockSize
	for len(r.table) < need {
		b, ok := c.blocks.allocate()
		if !ok {
			return false
		}
		r.table = append(r.table, b)
	}
	return true
}

// preemptFor frees blocks for the running request at index i by preempting
// the most recently admitted running requests (recompute: they go back to
// the front of the queue). It returns the new index of that request, or -1
// if it had to preempt the request itself.
func (c *Core) preemptFor(r *Request, i int) int {
	for len(c.running) > 0 {
		victim := c.running[len(c.running)-1]
		for _, x := range c.running {
			if x.arrival > victim.arrival {
				victim = x
			}
		}
		c.running = slices.DeleteFunc(c.running, func(x *Request) bool { return x == victim })
		c.releaseBlocks(victim)
		victim.computed, victim.loading = 0, 0
		victim.target = len(victim.tokens)
		c.waiting = append([]*Request{victim}, c.waiting...)
		c.stats.Preemptions++
		if victim == r {
			return -1
		}
		if c.blocks.freeBlocks() > 0 {
			return slices.Index(c.running, r)
		}
	}
	return -1
}

// advance applies n computed tokens to r, caches newly full blocks, and
// produces a token when r has caught up with its sequence.
func (c *Core) advance(r *Request, n int) (Output, bool) {
	bs := c.cfg.BlockSize
	first := r.computed / bs
	r.computed += n
	if c.hyb != nil {
		c.hyb.computed(c, r, first)
	}
	for i := first; c.hyb == nil && i < r.computed/bs && i < len(r.hashes); i++ {
		if r.computed >= (i+1)*bs {
			parent, hasParent := c.parentOf(r, i)
			c.blocks.commit(r.table[i], r.hashes[i], parent, hasParent)
		}
	}
	if r.computed < r.target {
		return Output{}, false // a chunk of a longer prefill
	}
	tok, eos, lp, hasLP := c.sample(r)
	r.tokens = append(r.tokens, tok)
	r.generated++
	c.stats.GeneratedTokens++
	r.hashes, _ = c.hasher.Extend(r.hashes, r.tokens, &r.Keys)
	r.target = len(r.tokens)
	out := Output{Key: r.Key, Token: tok, HasToken: true, First: !r.started, Cached: r.cached, Logprob: lp, HasLogprob: hasLP}
	r.started = true
	var reason wire.FinishReason
	switch {
	case eos || r.stopTokens[tok]:
		reason = wire.FinishStop
	case r.Params.MaxTokens > 0 && r.generated >= r.Params.MaxTokens, len(r.tokens) >= c.cfg.MaxModelLen:
		reason = wire.FinishLength
	}
	if reason != wire.FinishNone {
		last := c.finish(r, reason)
		out.Finish, out.PromptTokens, out.CompletionTokens = reason, last.PromptTokens, last.CompletionTokens
	} else if r.handoff != nil && r.handoff.side == wire.HandoffPrefill {
		c.park(r, &out) // disagg.go
	}
	return out, true
}

// markAdmitted records that r got its blocks this step: the first time, its
// cached tokens (what the prefix cache covered) count in the stats; every
// time, it takes the next admission number (preemption takes the newest).
func (c *Core) markAdmitted(r *Request) {
	if !r.admitted {
		r.admitted = true
		r.cached = r.computed
		c.stats.CachedTokens += r.cached
		c.stats.PromptTokens += r.promptLen
	}
	r.arrival = c.arrivals
	c.arrivals++
}
