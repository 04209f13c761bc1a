package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Disaggregated serving (wire PROTOCOL.md 6.10) in the scheduler. A
// prefill-side request runs as any other until its first token; then,
// unless that token ends it, it is parked: out of the running batch, its
// blocks pinned for the decode engine, until the router releases it
// (Cancel) or its deadline passes (Expire). A decode-side request is
// admitted with the prompt's blocks the prefill engine computed and this
// rank lacks: they are allocated and committed at once (STORED events, so
// a later turn can be routed here) and the request waits, as for a
// lower-tier load, until they have crossed the KV link. Transfers into a
// rank queue on its one link: backlog[kvstore.TierGPU], unused by tier
// loads (which go from a lower tier into the GPU), is that link's.

// Disagg is a rank's part in disaggregated serving.
type Disagg struct {
	// Role is what the engine announces (wire.EngineRole.Features) and
	// takes: a prefill engine only prefill-side hand-offs, a decode engine
	// decode sides and ordinary requests, both only ordinary requests.
	Role wire.EngineRole
	// Link carries KV transferred into this rank from a prefill engine
	// (zero: DefaultKVLink).
	Link TierLink
}

// DefaultKVLink is a 200 Gb/s RDMA NIC (InfiniBand HDR or RoCE, one per
// GPU as Mooncake and NVIDIA Dynamo deploy it): 25 GB/s, and 1 ms for a
// hand-off's round trips (the read's setup and its completion notice).
var DefaultKVLink = TierLink{GBps: 25, Latency: time.Millisecond}

// handoff is a request's part of a hand-off.
type handoff struct {
	side wire.HandoffSide
	// blocks (decode side) is how many full prompt blocks the prefill
	// engine holds for it; pending, how many of them this rank committed
	// and has not yet charged the link for.
	blocks, pending int
	// params (prefill side) are the transfer parameters handed over.
	params []byte
}

// parked reports whether r is a prefill-side request that handed off.
func (r *Request) parked() bool {
	return r.handoff != nil && r.handoff.side == wire.HandoffPrefill && r.started
}

// park takes r, a prefill-side request that produced its first token and
// goes on, out of the running batch with its blocks pinned, and puts the
// transfer parameters on its output.
func (c *Core) park(r *Request, out *Output) {
	c.running = slices.DeleteFunc(c.running, func(x *Request) bool { return x == r })
	out.Handoff = r.handoff.params
}

// Expire frees r if it is still parked here (its keep deadline passed)
// and returns its last output, finish abort.
func (c *Core) Expire(r *Request) (Output, bool) {
	if c.byKey[r.Key] != r || !r.parked() {
		return Output{}, false
	}
	return c.finish(r, wire.FinishAbort), true
}

// takeTransfer, at admission, commits the prompt blocks from r's table on
// that the prefill engine holds (up to limit), as arrived from it.
func (c *Core) takeTransfer(r *Request, limit int) {
	h := r.handoff
	if h == nil || h.side != wire.HandoffDecode {
		return
	}
	for i := len(r.table); i < min(limit, h.blocks); i++ {
		b, ok := c.blocks.allocate()
		if !ok {
			return
		}
		parent, hasParent := c.parentOf(r, i)
		c.blocks.commit(b, r.hashes[i], parent, hasParent)
		r.table = append(r.table, b)
		h.pending++
	}
}

// startTransfer queues r's pending transfer on the KV link and returns
// how long until it is done (0: none).
func (c *Core) startTransfer(r *Request) time.Duration {
	h := r.handoff
	if h == nil || h.pending == 0 {
		return 0
	}
	c.backlog[kvstore.TierGPU] += c.kvLink().LoadTime(h.pending, c.cfg.blockBytes())
	c.stats.TransferredBlocks += h.pending
	h.pending = 0
	return c.backlog[kvstore.TierGPU]
}

// TransferTime is how long blocks more blocks would take to arrive over
// the KV link now, behind the transfers already on it.
func (c *Core) TransferTime(blocks int) time.Duration {
	return c.backlog[kvstore.TierGPU] + c.kvLink().LoadTime(blocks, c.cfg.blockBytes())
}

func (c *Core) kvLink() TierLink {
	if c.cfg.Disagg.Link == (TierLink{}) {
		return DefaultKVLink
	}
	return c.cfg.Disagg.Link
}

func (d *Disagg) validate(groups int) error {
	switch {
	case d.Role > wire.RoleDecode:
		return fmt.Errorf("disaggregation role %v", d.Role)
	case d.Role != wire.RoleBoth && groups > 0:
		return fmt.Errorf("role %v: hand-offs of a profile with KV cache groups are not modelled", d.Role)
	}
	if d.Link != (TierLink{}) {
		return d.Link.validate("kv transfer")
	}
	return nil
}

// HandOffPrefill makes r, before Add, the prefill side of a hand-off, as
// a GENERATE's hand-off section does: after its first token (unless that
// token ends it) it is parked with its blocks pinned, its output's
// Handoff set to params (not nil), until Cancel or Expire. The cluster
// simulation (perf/cluster) drives hand-offs through it.
func (r *Request) HandOffPrefill(params []byte) {
	if params == nil {
		params = []byte{}
	}
	r.handoff = &handoff{side: wire.HandoffPrefill, params: params}
}

// HandOffDecode makes r, before Add, the decode side of a hand-off whose
// prefill engine holds blocks full blocks of its prompt: those this rank
// lacks are committed at admission and r waits for them to cross the KV
// link (TransferTime).
func (r *Request) HandOffDecode(blocks int) {
	r.handoff = &handoff{side: wire.HandoffDecode, blocks: blocks}
}
