package sim

import (
	"fmt"
	"slices"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// hybrid models a hybrid model's KV cache as vLLM's hybrid KV cache
// manager keeps it: one block table per KV cache group over one shared
// block pool, a prefix cache keyed by (hash, group) (blockManager.groups),
// and each group keeping what its attention kind needs
// (vllm/v1/core/single_type_kv_cache_manager.py at vllm-project/vllm
// commit 00b08dc44519a82cbdd9061d92d1226985094622):
//
//   - full attention keeps every block of the sequence;
//   - a sliding window frees the blocks wholly before its window as the
//     sequence moves on (SlidingWindowManager.remove_skipped_blocks): they
//     go back to the pool still cached, until evicted;
//   - a Mamba group keeps one running state and caches the state at block
//     boundaries, one block per state: here at the last boundary each step
//     reaches, as vLLM's mamba "align" mode caches the state at each
//     aligned chunk end (it splits a prefill chunk at a block boundary so
//     that its end is one; the simulator computes the chunk whole and keeps
//     the state of that boundary, the same cache a step later sooner), and
//     frees the state before it;
//   - a new request's hit is the coordinator's (kvstore.HybridHit: the
//     index computes the same rule from the events), and it takes only the
//     blocks each group needs there: all of a full group's, the window's of
//     a sliding group, the state of a Mamba group.
//
// Every group's changes are KV events naming the group. All groups use the
// rank's block size. Lower tiers are not modelled for hybrid models.
type hybrid struct {
	groups  []kvstore.Group
	windows []int // a sliding group's window in tokens
	tables  map[*Request]*hybridTables
}

// hybridTables are one request's blocks per group: tab[g][j] is group g's
// block at position j, -1 where the group holds none there; state[g] is a
// Mamba group's running-state block, -1 when it needs a new one.
type hybridTables struct {
	tab   [][]int32
	state []int32
}

// groupKinds maps GroupSpec.Kind to the kinds.
var groupKinds = map[string]kvstore.GroupKind{"full": kvstore.GroupFull,
	"sliding_window": kvstore.GroupSlidingWindow, "mamba": kvstore.GroupMamba}

func newHybrid(specs []GroupSpec, blockSize int) (*hybrid, error) {
	h := &hybrid{tables: make(map[*Request]*hybridTables)}
	for i, s := range specs {
		kind, ok := groupKinds[s.Kind]
		if !ok {
			return nil, fmt.Errorf("sim: group %d: kind %q (want full, sliding_window or mamba)", i, s.Kind)
		}
		g, err := kvstore.GroupOf(kind, blockSize, s.Window, blockSize)
		if err != nil {
			return nil, fmt.Errorf("sim: group %d: %w", i, err)
		}
		h.groups, h.windows = append(h.groups, g), append(h.windows, s.Window)
	}
	if len(h.groups) > wire.MaxGroups {
		return nil, fmt.Errorf("sim: %d KV cache groups, at most %d", len(h.groups), wire.MaxGroups)
	}
	return h, nil
}

// wireGroups are the groups as the handshake announces them.
func (h *hybrid) wireGroups(blockSize int) []wire.Group {
	out := make([]wire.Group, len(h.groups))
	for i, g := range h.groups {
		out[i] = wire.Group{Kind: wire.GroupKind(g.Kind), BlockSize: uint32(blockSize), Window: uint32(h.windows[i])}
	}
	return out
}

// Groups returns the KV cache groups the rank announces in its handshake
// (nil for a model with one cache, or groups NewCore refuses).
func (c *RankConfig) Groups() []wire.Group {
	if len(c.Profile.Groups) == 0 {
		return nil
	}
	h, err := newHybrid(c.Profile.Groups, c.BlockSize)
	if err != nil {
		return nil
	}
	return h.wireGroups(c.BlockSize)
}

// IndexGroups returns the rank's KV cache groups as a router's index keeps
// them (kvstore.EngineConfig.Groups; nil for a model with one cache), for
// simulations that index a rank's events without a handshake.
func (c *RankConfig) IndexGroups() []kvstore.Group {
	if len(c.Profile.Groups) == 0 {
		return nil
	}
	h, err := newHybrid(c.Profile.Groups, c.BlockSize)
	if err != nil {
		return nil
	}
	return h.groups
}

// hybridHit is the coordinator's hit for r, in blocks.
func (c *Core) hybridHit(r *Request) int {
	limit := min(len(r.hashes), (len(r.tokens)-1)/c.cfg.BlockSize) // at least one token is computed
	return kvstore.HybridHit(c.hyb.groups, limit, func(g, j int) bool {
		_, ok := c.blocks.groups[g][r.hashes[j]]
		return ok
	})
}

// admitHybrid is admit for a hybrid model.
func (c *Core) admitHybrid(r *Request, budget int) bool {
	hit := c.hybridHit(r)
	t := &hybridTables{tab: make([][]int32, len(c.hyb.groups)), state: make([]int32, len(c.hyb.groups))}
	for g, gr := range c.hyb.groups {
		t.tab[g], t.state[g] = slices.Repeat([]int32{-1}, hit), -1
		lo := 0 // the first block the group needs at the hit point
		switch gr.Kind {
		case kvstore.GroupSlidingWindow:
			lo = max(0, hit-max(gr.WindowBlocks, 1))
		case kvstore.GroupMamba:
			lo = max(0, hit-1)
		}
		for j := lo; j < hit; j++ {
			b := c.blocks.groups[g][r.hashes[j]]
			c.blocks.acquire(b)
			t.tab[g][j] = b
		}
	}
	c.hyb.tables[r] = t
	r.computed = hit * c.cfg.BlockSize
	if !c.hyb.ensure(c, r, r.computed+min(r.target-r.computed, budget)) {
		c.releaseBlocks(r)
		r.computed = 0
		return false
	}
	c.markAdmitted(r)
	return true
}

// ensure grows r's tables to hold tokens, all or nothing; false if the pool
// is out.
func (h *hybrid) ensure(c *Core, r *Request, tokens int) bool {
	t := h.tables[r]
	h.skip(c, r, t)
	need := (tokens + c.cfg.BlockSize - 1) / c.cfg.BlockSize
	count := 0
	for g, gr := range h.groups {
		switch gr.Kind {
		case kvstore.GroupMamba:
			if t.state[g] < 0 {
				count++
			}
		default:
			count += max(0, need-max(len(t.tab[g]), h.skipped(c, r, g)))
		}
	}
	if count > c.blocks.freeBlocks() {
		return false
	}
	for g, gr := range h.groups {
		if gr.Kind == kvstore.GroupMamba && t.state[g] < 0 {
			t.state[g], _ = c.blocks.allocate()
		}
		for j := len(t.tab[g]); j < need; j++ {
			b := int32(-1)
			if gr.Kind != kvstore.GroupMamba && j >= h.skipped(c, r, g) {
				b, _ = c.blocks.allocate()
			}
			t.tab[g] = append(t.tab[g], b)
		}
	}
	return true
}

// skipped is how many leading blocks of sliding group g r no longer
// attends to (get_num_skipped_tokens: computed - window + 1 tokens); 0 for
// the other kinds.
func (h *hybrid) skipped(c *Core, r *Request, g int) int {
	if h.groups[g].Kind != kvstore.GroupSlidingWindow {
		return 0
	}
	return max(0, r.computed-h.windows[g]+1) / c.cfg.BlockSize
}

// skip frees the sliding groups' blocks outside their windows, last first.
func (h *hybrid) skip(c *Core, r *Request, t *hybridTables) {
	for g := range h.groups {
		for j := min(h.skipped(c, r, g), len(t.tab[g])) - 1; j >= 0 && t.tab[g][j] >= 0; j-- {
			c.blocks.release(t.tab[g][j : j+1])
			t.tab[g][j] = -1
		}
	}
}

// computed caches the blocks r has completed since block first (full and
// sliding groups), keeps a Mamba group's state at the last boundary
// reached, and frees what the windows left behind.
func (h *hybrid) computed(c *Core, r *Request, first int) {
	t := h.tables[r]
	done := min(r.computed/c.cfg.BlockSize, len(r.hashes))
	for g, gr := range h.groups {
		if gr.Kind != kvstore.GroupMamba {
			for j := first; j < done; j++ {
				if b := t.tab[g][j]; b >= 0 {
					parent, hasParent := c.parentOf(r, j)
					c.blocks.commitGroup(b, uint16(g), r.hashes[j], parent, hasParent)
				}
			}
			continue
		}
		if done <= first || t.state[g] < 0 {
			continue // no new boundary
		}
		b := t.state[g]
		parent, hasParent := c.parentOf(r, done-1)
		if !c.blocks.commitGroup(b, uint16(g), r.hashes[done-1], parent, hasParent) {
			c.blocks.release([]int32{b}) // another request keeps that state
			b = -1
		}
		for j := range t.tab[g] { // the state before it is no longer needed
			if t.tab[g][j] >= 0 {
				c.blocks.release(t.tab[g][j : j+1])
				t.tab[g][j] = -1
			}
		}
		t.tab[g][done-1], t.state[g] = b, -1
	}
	h.skip(c, r, t)
}

// release drops all of r's blocks.
func (h *hybrid) release(c *Core, r *Request) {
	t := h.tables[r]
	if t == nil {
		return
	}
	for _, b := range t.blocks() {
		c.blocks.release([]int32{b})
	}
	delete(h.tables, r)
}

// blocks lists the blocks of t, last position first.
func (t *hybridTables) blocks() []int32 {
	var out []int32
	for g := range t.tab {
		if t.state[g] >= 0 {
			out = append(out, t.state[g])
		}
		for j := len(t.tab[g]) - 1; j >= 0; j-- {
			if t.tab[g][j] >= 0 {
				out = append(out, t.tab[g][j])
			}
		}
	}
	return out
}
