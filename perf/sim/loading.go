package sim

import (
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// Loads from lower tiers run beside the batch, as vLLM's offloading
// connector loads asynchronously (the request waits in
// WAITING_FOR_REMOTE_KVS while the scheduler runs the others): a request
// whose prefix comes up from CPU memory or disk holds its GPU blocks but is
// not computed until its load is done, and no one else waits for it. Each
// tier's link carries one load after another, so concurrent loads of a
// tier queue; the CPU's and the disk's run in parallel.

// startLoads queues the loads of one admitted request on their tiers'
// links and returns how long until all of them are done (0: none).
func (c *Core) startLoads(loads *[kvstore.NumTiers]int) time.Duration {
	bb := c.cfg.blockBytes()
	if bb <= 0 {
		return 0 // the profile gives KV no size: loads are free
	}
	var done time.Duration
	for t, link := range [kvstore.NumTiers]TierLink{kvstore.TierCPU: c.cfg.CPULink, kvstore.TierDisk: c.cfg.DiskLink} {
		if loads[t] > 0 {
			c.backlog[t] += link.LoadTime(loads[t], bb)
			done = max(done, c.backlog[t])
		}
	}
	return done
}

// nextLoad is how long until the first running request's load is done (0
// when none is loading).
func (c *Core) nextLoad() time.Duration {
	var next time.Duration
	for _, r := range c.running {
		if r.loading > 0 && (next == 0 || r.loading < next) {
			next = r.loading
		}
	}
	return next
}

// elapse advances the loads in flight by d of simulated time.
func (c *Core) elapse(d time.Duration) {
	if d <= 0 {
		return
	}
	for _, r := range c.running {
		r.loading = max(r.loading-d, 0)
	}
	for t := range c.backlog {
		c.backlog[t] = max(c.backlog[t]-d, 0)
	}
}
