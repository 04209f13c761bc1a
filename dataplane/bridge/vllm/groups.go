package vllm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// rankGroup names one KV cache group's table of a rank.
type rankGroup struct {
	rank  int
	group uint16
}

// groupMap is how a translator maps vLLM's KV cache groups (group_idx,
// kv_cache_spec_kind) onto the groups it announces. Configured (SetGroups:
// the groups the bridge's WELCOME lists, in vLLM's order), every group is
// indexed as itself, and an event whose kind contradicts its group's is
// skipped. Not configured, routers know one cache, so only one group is
// translated, as group 0: the first whose events say full attention
// (whatever its place: a Kimi deployment has three Mamba groups first), or
// vLLM's group 0 while no event has said a kind (vLLM from before the
// kinds). The others are skipped: indexed as group 0, one group's hashes
// would overwrite another's (vLLM mixes no group into a block hash).
type groupMap struct {
	configured []wire.Group
	primary    int // vLLM's group translated as group 0 when not configured; -1: not known yet
}

// SetGroups tells the translator the KV cache groups its bridge announces,
// in vLLM's order; call it before the first Apply.
func (t *Translator) SetGroups(gs []wire.Group) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups.configured = append([]wire.Group(nil), gs...)
}

// groupOf returns the group ev's blocks are translated into, or false
// (counted) when they are not translated.
func (t *Translator) groupOf(ev *Event) (uint16, bool) {
	kind, known := specKind(ev.KVCacheSpecKind)
	g := &t.groups
	if g.configured != nil {
		switch {
		case ev.GroupIdx < 0 || ev.GroupIdx >= len(g.configured):
			t.skipped.OtherGroup += uint64(max(len(ev.BlockHashes), 1))
			return 0, false
		case ev.KVCacheSpecKind != "" && (!known || kind != g.configured[ev.GroupIdx].Kind):
			t.skipped.GroupKind += uint64(len(ev.BlockHashes))
			return 0, false
		}
		return uint16(ev.GroupIdx), true
	}
	if ev.KVCacheSpecKind != "" && g.primary < 0 && known && kind == wire.GroupFull {
		g.primary = ev.GroupIdx // the first full-attention group
	}
	if ev.GroupIdx != max(g.primary, 0) || (ev.KVCacheSpecKind != "" && kind != wire.GroupFull) {
		t.skipped.OtherGroup += uint64(max(len(ev.BlockHashes), 1))
		return 0, false
	}
	return 0, true
}

// perBlock keeps, of the chained hashes kv of a stored event's tokens (one
// per hash block), the one that names each of its group's blocks: the hash
// of the block's last hash block (PROTOCOL.md 4.1), for a configured group
// whose blocks span several hash blocks; any other event's blocks are hash
// blocks, and kv is returned as it is.
func (g *groupMap) perBlock(kv []uint64, ev *Event, hashBlock int) []uint64 {
	if g.configured == nil || ev.BlockSize <= hashBlock || ev.BlockSize%hashBlock != 0 ||
		ev.GroupIdx >= len(g.configured) || int(g.configured[ev.GroupIdx].BlockSize) != ev.BlockSize {
		return kv
	}
	stride := ev.BlockSize / hashBlock
	out := kv[:0]
	for i := stride - 1; i < len(kv); i += stride {
		out = append(out, kv[i])
	}
	return out
}

func (t *Translator) groupTable(rank int, group uint16) map[Hash]*block {
	k := rankGroup{rank, group}
	tb := t.groupTables[k]
	if tb == nil {
		tb = map[Hash]*block{}
		t.groupTables[k] = tb
	}
	return tb
}

// rankTables returns a rank's tables by group.
func (t *Translator) rankTables(rank int) map[uint16]map[Hash]*block {
	out := map[uint16]map[Hash]*block{0: t.table(rank, 0)}
	for k, tb := range t.groupTables {
		if k.rank == rank {
			out[k.group] = tb
		}
	}
	return out
}

// clearRank forgets every group's blocks of a rank.
func (t *Translator) clearRank(rank int) {
	for _, tb := range t.rankTables(rank) {
		clear(tb)
	}
}

// ParseGroups reads a hybrid model's KV cache groups as an operator writes
// them, in vLLM's group order, comma-separated: "full", "sliding_window:W"
// (W tokens) or "mamba", each optionally "@B" for a block size B other
// than blockSize (a multiple of it), e.g. "sliding_window:128,full" for
// gpt-oss or "mamba,mamba,mamba,full" for Qwen3-Next. "" is no groups.
func ParseGroups(spec string, blockSize int) ([]wire.Group, error) {
	if spec == "" {
		return nil, nil
	}
	var out []wire.Group
	for i, item := range strings.Split(spec, ",") {
		kindWin, bsText, hasBS := strings.Cut(strings.TrimSpace(item), "@")
		kindText, winText, hasWin := strings.Cut(kindWin, ":")
		g := wire.Group{BlockSize: uint32(blockSize)}
		kind, ok := specKind(kindText)
		if !ok && kindText == "full" {
			kind, ok = wire.GroupFull, true
		}
		if !ok {
			return nil, fmt.Errorf("group %d: kind %q (want full, sliding_window:W or mamba)", i, kindText)
		}
		g.Kind = kind
		if hasWin != (kind == wire.GroupSlidingWindow) {
			return nil, fmt.Errorf("group %d (%s): a window goes with sliding_window, and only with it", i, item)
		}
		if hasWin {
			w, err := strconv.ParseUint(winText, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("group %d: window %q: %w", i, winText, err)
			}
			g.Window = uint32(w)
		}
		if hasBS {
			b, err := strconv.ParseUint(bsText, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("group %d: block size %q: %w", i, bsText, err)
			}
			g.BlockSize = uint32(b)
		}
		if _, err := kvstore.GroupOf(kvstore.GroupKind(g.Kind), int(g.BlockSize), int(g.Window), blockSize); err != nil {
			return nil, fmt.Errorf("group %d (%s): %w", i, item, err)
		}
		out = append(out, g)
	}
	if len(out) > wire.MaxGroups {
		return nil, fmt.Errorf("%d groups, at most %d", len(out), wire.MaxGroups)
	}
	return out, nil
}
