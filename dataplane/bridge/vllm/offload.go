package vllm

import "github.com/kvgate/kvgate/wire"

// Offloaded blocks. With the OffloadingConnector, vLLM publishes what its
// OffloadingManager stored or evicted as BlockStored / BlockRemoved events
// (OffloadingConnectorScheduler.take_events in
// vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py at
// vllm-project/vllm 7368908123b14495cca88daf580cbc07c384d5b3): medium is
// the manager's ("CPU" for the CPU backend), token_ids empty, no parent,
// lora fields None, block_size the manager's event block size (0 where a
// version does not set it), and block_hashes the request's BlockHash bytes
// as they are — never passed through maybe_convert_block_hash.
//
// The GPU events of the same blocks carry maybe_convert_block_hash(hash)
// (vllm/v1/core/kv_cache_utils.py at 001cabc1be16a59a70d720ed61a13b678c060a18):
// the same bytes, or with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
// int.from_bytes(hash, "big") & (2**64 - 1), the hash's last 8 bytes as a
// big-endian integer. resolveOffloaded maps a raw hash onto whichever form
// the GPU event used.
//
// An offloaded block is offloaded_block_size = block_size_factor GPU
// blocks, and its hash is that of the last GPU block it covers
// (_get_block_hashes takes every block_size_factor-th hash, starting at
// block_size_factor - 1). When block_size says the factor is above 1, the
// copy covers the chain of that many GPU blocks ending at the hash.

// maxSpan bounds the GPU blocks one offloaded block may cover.
const maxSpan = 64

// intForm is the integer hash vLLM publishes for raw hash bytes.
func intForm(raw string) Hash {
	var b [9]byte
	b[0] = 'i'
	for i := 0; i < 8 && i < len(raw); i++ {
		b[8-i] = raw[len(raw)-1-i]
	}
	return Hash(b[:])
}

// resolveOffloaded returns the engine hash under which the table holds the
// block an offloading event names.
func resolveOffloaded(tb map[Hash]*block, h Hash) (Hash, *block) {
	if b := tb[h]; b != nil {
		return h, b
	}
	if len(h) > 0 && h[0] == 'b' {
		if ih := intForm(string(h[1:])); tb[ih] != nil {
			return ih, tb[ih]
		}
	}
	return "", nil
}

// span is how many GPU blocks an offloaded block of size blockSize covers.
func (t *Translator) span(blockSize int) int {
	if blockSize == 0 {
		blockSize = t.OffloadBlockSize
	}
	if t.gpuBlockSize <= 0 || blockSize <= t.gpuBlockSize || blockSize%t.gpuBlockSize != 0 {
		return 1
	}
	return min(blockSize/t.gpuBlockSize, maxSpan)
}

// chain returns the blocks of a span ending at last, oldest first, with
// their engine hashes; it is shorter when the table lacks a parent.
func chain(tb map[Hash]*block, lastEng Hash, last *block, span int) ([]Hash, []*block) {
	engs, bs := []Hash{lastEng}, []*block{last}
	for b := last; len(bs) < span && b.parentEng != ""; {
		p := tb[b.parentEng]
		if p == nil {
			break
		}
		engs, bs = append(engs, b.parentEng), append(bs, p)
		b = p
	}
	for i, j := 0, len(bs)-1; i < j; i, j = i+1, j-1 {
		engs[i], engs[j], bs[i], bs[j] = engs[j], engs[i], bs[j], bs[i]
	}
	return engs, bs
}

// offloadStored marks the blocks an offloading event stored as held in its
// tier: one STORED event per offloaded block, chained from its parent.
func (t *Translator) offloadStored(tb map[Hash]*block, ev *Event, out []wire.Event) []wire.Event {
	tier, ok := tierOf(ev.Medium)
	if !ok {
		t.skipped.UnknownTier += uint64(len(ev.BlockHashes))
		return out
	}
	span := t.span(ev.BlockSize)
	for _, h := range ev.BlockHashes {
		eng, last := resolveOffloaded(tb, h)
		if last == nil {
			t.skipped.UnknownOffload++
			continue
		}
		_, bs := chain(tb, eng, last, span)
		last.span = uint8(len(bs))
		kv := make([]uint64, len(bs))
		for i, b := range bs {
			b.tiers |= 1 << tier
			b.refs[tier]++
			kv[i] = b.kv
		}
		out = append(out, wire.Event{Kind: wire.EventStored, Tier: tier, HasParent: bs[0].hasParent, Parent: bs[0].parent,
			LoRAID: bs[0].lora, Hashes: wire.HashesOf(kv)})
	}
	return out
}

// offloadRemoved drops an offloaded block (the span recorded when it was
// stored) from its tier once no announced copy holds it.
func (t *Translator) offloadRemoved(tb map[Hash]*block, tier wire.Tier, ev *Event, out []wire.Event) []wire.Event {
	var hs []uint64
	for _, h := range ev.BlockHashes {
		eng, last := resolveOffloaded(tb, h)
		if last == nil || last.tiers&(1<<tier) == 0 {
			t.skipped.UnknownOffload++
			continue
		}
		engs, bs := chain(tb, eng, last, max(int(last.span), 1))
		for i, b := range bs {
			if b.tiers&(1<<tier) == 0 {
				continue
			}
			if b.refs[tier] > 1 {
				b.refs[tier]-- // another announced copy still holds it
				continue
			}
			b.refs[tier] = 0
			hs = append(hs, b.kv)
			if b.tiers &^= 1 << tier; b.tiers == 0 {
				delete(tb, engs[i])
			}
		}
		last.span = 0
	}
	if len(hs) > 0 {
		out = append(out, wire.Event{Kind: wire.EventRemoved, Tier: tier, Hashes: wire.HashesOf(hs)})
	}
	return out
}

// TierBlocks counts, per tier, the blocks of rank the engine's events say
// it holds: the lower tiers' use in LOAD where the engine publishes its
// offloaded blocks (vLLM's OffloadingConnector: medium "CPU", or its disk
// backends' mediums).
func (t *Translator) TierBlocks(rank int) [wire.NumTiers]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n [wire.NumTiers]uint64
	for _, b := range t.ranks[rank] {
		for tier := range wire.NumTiers {
			if b.tiers&(1<<tier) != 0 {
				n[tier]++
			}
		}
	}
	return n
}
