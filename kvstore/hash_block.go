package kvstore

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// BlockMM is one multimodal item's extra key in one block: the item's hash
// and where it starts relative to the block's first token (negative when
// it began in an earlier block). It is vLLM's per-block extra key
// (identifier, offset - start_token_idx), with kvgate's hash for the
// identifier.
type BlockMM struct {
	Hash      uint64
	RelOffset int32
}

// BlockExtra are the extra keys of one block, as an engine reports them
// per block (vLLM's BlockStored extra_keys).
type BlockExtra struct {
	// LoRAID is the adapter; 0 is the base model.
	LoRAID uint32
	// CacheSalt enters block 0 only: pass it for the prompt's first block
	// and nil for every later one.
	CacheSalt []byte
	// MM are the items overlapping the block, in item order.
	MM []BlockMM
}

// HashBlock returns the hash of one full block of tokens whose parent hash
// is parent (Root() for a prompt's first block), with the block's own
// extra keys. Hashing a prompt block by block with the extras of each
// block gives Hash's hashes: a bridge rebuilds kvgate's hash of a block
// from an engine's event, which names the block's tokens, parent and
// extra keys but not the prompt around it. It does not allocate unless the
// extras pass 128 bytes.
func (h *Hasher) HashBlock(parent uint64, tokens []uint32, x *BlockExtra) (uint64, error) {
	if len(tokens) != h.blockSize {
		return 0, fmt.Errorf("%w: a block of %d tokens, want %d", ErrBadKeys, len(tokens), h.blockSize)
	}
	if x == nil {
		x = &BlockExtra{}
	}
	if len(x.CacheSalt) > 0xffff {
		return 0, fmt.Errorf("cache salt of %d bytes: %w", len(x.CacheSalt), ErrBadKeys)
	}
	var stack [8 + 4*64 + 128]byte
	buf := stack[:]
	if need := 8 + 4*h.blockSize + 5 + 3 + len(x.CacheSalt) + 13*len(x.MM); need > len(buf) {
		buf = make([]byte, need)
	}
	binary.LittleEndian.PutUint64(buf, parent)
	end := 8 + copy(buf[8:], uint32Bytes(tokens))
	end = putLoRA(buf, end, x.LoRAID)
	end = putSalt(buf, end, x.CacheSalt)
	for _, m := range x.MM {
		end = putMM(buf, end, m.Hash, m.RelOffset)
	}
	return xxh3.HashSeed(buf[:end], h.seed), nil
}
