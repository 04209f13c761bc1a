package kvstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// HashConfig configures a Hasher. Router and engine must agree on all three
// fields (the wire handshake carries them), or their hashes never meet.
type HashConfig struct {
	// BlockSize is the number of tokens per KV block (vLLM's default is 16).
	BlockSize int
	// Seed seeds every xxh3 call.
	Seed uint64
	// Model enters the root hash, so equal token ids under two models never
	// share a block hash.
	Model string
}

// MaxBlockSize bounds HashConfig.BlockSize.
const MaxBlockSize = 4096

// Validate reports a configuration no engine could use.
func (c HashConfig) Validate() error {
	if c.BlockSize < 1 || c.BlockSize > MaxBlockSize {
		return fmt.Errorf("kvstore: block size %d, want 1..%d", c.BlockSize, MaxBlockSize)
	}
	return nil
}

// MMItem is a multimodal item (image, audio) over prompt positions
// [Offset, Offset+Length) with the hash of its content.
type MMItem struct {
	Offset, Length uint32
	Hash           uint64
}

// Keys are the extra keys that change a block's meaning beyond its tokens.
type Keys struct {
	// LoRAID is the adapter the prompt runs with; 0 is the base model.
	LoRAID uint32
	// CacheSalt isolates tenants: it enters block 0, hence every block.
	CacheSalt []byte
	// MM lists multimodal items, sorted by Offset, non-empty and not
	// overlapping (each image's placeholder tokens).
	MM []MMItem
}

// Tags of the extra-key encoding (PROTOCOL.md section 9 refers here).
const (
	tagLoRA = 0x01
	tagSalt = 0x02
	tagMM   = 0x03
)

// Hasher computes chained block hashes:
//
//	h[i]   = XXH3_64(seed, parent_le64 || tokens_le32[i*B:(i+1)*B] || extra_i)
//	parent = h[i-1], or for block 0 the root XXH3_64(seed, "kvgate-root" || model)
//	extra_i, in this order, each present only when it applies:
//	  | 0x01 | lora_id u32 |                     LoRAID != 0
//	  | 0x02 | len u16 | salt bytes |            i == 0 and CacheSalt != ""
//	  | 0x03 | hash u64 | rel_offset i32 | x k   each MM item overlapping block i, in item order
//
// (integers little-endian). An MM item overlaps block i when it has a
// token in [i*B, (i+1)*B); its rel_offset is Offset - i*B, where it starts
// relative to the block's first token: negative when it began in an
// earlier block. That is vLLM's per-block extra key (identifier,
// offset - start_token_idx) of _gen_mm_extra_hash_keys
// (vllm/v1/core/kv_cache_utils.py at 001cabc1be16a59a70d720ed61a13b678c060a18),
// so a block's hash can be rebuilt from a vLLM KV event alone (HashBlock).
// The same image at another position in an otherwise equal block gives
// another hash.
//
// A partial last block is not hashed. A Hasher is immutable and safe for
// concurrent use.
type Hasher struct {
	blockSize int
	seed      uint64
	root      uint64
}

// ErrBadKeys is returned for keys that cannot be hashed (unsorted or
// out-of-range multimodal items, an oversized salt).
var ErrBadKeys = errors.New("kvstore: invalid hash keys")

// NewHasher returns a Hasher for cfg.
func NewHasher(cfg HashConfig) (*Hasher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Hasher{
		blockSize: cfg.BlockSize,
		seed:      cfg.Seed,
		root:      xxh3.HashSeed(append([]byte("kvgate-root"), cfg.Model...), cfg.Seed),
	}, nil
}

// BlockSize returns the tokens per block.
func (h *Hasher) BlockSize() int { return h.blockSize }

// Root returns the parent hash of block 0.
func (h *Hasher) Root() uint64 { return h.root }

// Hash appends the hashes of every full block of tokens to dst[:0].
func (h *Hasher) Hash(dst []uint64, tokens []uint32, keys *Keys) ([]uint64, error) {
	return h.Extend(dst[:0], tokens, keys)
}

// Extend continues hashing: dst holds the hashes of the first len(dst) blocks
// of tokens (from an earlier Hash or Extend of a prefix of the same prompt),
// and Extend appends the hashes of the remaining full blocks.
func (h *Hasher) Extend(dst []uint64, tokens []uint32, keys *Keys) ([]uint64, error) {
	return h.ExtendLE(dst, uint32Bytes(tokens), keys)
}

// ExtendLE is Extend over token ids packed as little-endian uint32 bytes, as
// they arrive in a wire GENERATE: no conversion is needed.
func (h *Hasher) ExtendLE(dst []uint64, tokensLE []byte, keys *Keys) ([]uint64, error) {
	if err := keys.check(len(tokensLE) / 4); err != nil {
		return dst, err
	}
	bs := 4 * h.blockSize
	n := len(tokensLE) / bs
	from := len(dst)
	if from >= n {
		return dst, nil
	}
	parent := h.root
	if from > 0 {
		parent = dst[from-1]
	}
	if keys == nil || keys.empty() {
		return h.extendPlain(dst, tokensLE, from, n, parent), nil
	}
	var stack [8 + 4*64 + 128]byte
	buf := stack[:]
	if need := 8 + bs + keys.maxExtra(); need > len(buf) {
		buf = make([]byte, need)
	}
	mm := 0 // first MM item that may overlap the current block
	for i := from; i < n; i++ {
		binary.LittleEndian.PutUint64(buf, parent)
		end := 8 + copy(buf[8:], tokensLE[i*bs:(i+1)*bs])
		end, mm = keys.appendExtra(buf, end, i, h.blockSize, mm)
		parent = xxh3.HashSeed(buf[:end], h.seed)
		dst = append(dst, parent)
	}
	return dst, nil
}

// extendPlain is the hot path: no extra keys. Blocks of 15 to 22 tokens go
// through hashShort; for the others two scratch buffers alternate, so
// copying the next block's tokens does not wait on the hash reading the
// previous one.
func (h *Hasher) extendPlain(dst []uint64, tokensLE []byte, from, n int, parent uint64) []uint64 {
	bs := 4 * h.blockSize
	dst = slices.Grow(dst, n-from)[:n]
	if bs >= hashShortMin && bs <= hashShortMax {
		for i := from; i < n; i++ {
			parent = hashShort(parent, tokensLE[i*bs:(i+1)*bs], h.seed)
			dst[i] = parent
		}
		return dst
	}
	var stack [2][8 + 4*64]byte
	a, b := stack[0][:], stack[1][:]
	if 8+bs > len(a) {
		a, b = make([]byte, 8+bs), make([]byte, 8+bs)
	}
	a, b = a[:8+bs], b[:8+bs]
	for i := from; i < n; i++ {
		copy(a[8:], tokensLE[i*bs:(i+1)*bs])
		binary.LittleEndian.PutUint64(a, parent)
		parent = xxh3.HashSeed(a, h.seed)
		dst[i] = parent
		a, b = b, a
	}
	return dst
}

func (k *Keys) empty() bool { return k.LoRAID == 0 && len(k.CacheSalt) == 0 && len(k.MM) == 0 }

func (k *Keys) check(nTokens int) error {
	if k == nil {
		return nil
	}
	if len(k.CacheSalt) > 0xffff {
		return fmt.Errorf("cache salt of %d bytes: %w", len(k.CacheSalt), ErrBadKeys)
	}
	for i, it := range k.MM {
		if uint64(it.Offset)+uint64(it.Length) > uint64(nTokens) || it.Length == 0 {
			return fmt.Errorf("mm item %d [%d,+%d) outside %d tokens: %w", i, it.Offset, it.Length, nTokens, ErrBadKeys)
		}
		if i > 0 && uint64(it.Offset) < uint64(k.MM[i-1].Offset)+uint64(k.MM[i-1].Length) {
			return fmt.Errorf("mm item %d at %d: items not sorted by offset or overlapping: %w", i, it.Offset, ErrBadKeys)
		}
	}
	return nil
}

// maxExtra bounds the extra bytes of any one block.
func (k *Keys) maxExtra() int {
	if k == nil {
		return 0
	}
	return 5 + 3 + len(k.CacheSalt) + 13*len(k.MM)
}

// appendExtra writes extra_i at buf[end:] and returns the new end, and the
// first MM item that can still overlap later blocks.
func (k *Keys) appendExtra(buf []byte, end, block, blockSize, mm int) (int, int) {
	end = putLoRA(buf, end, k.LoRAID)
	if block == 0 {
		end = putSalt(buf, end, k.CacheSalt)
	}
	lo, hi := int64(block)*int64(blockSize), int64(block+1)*int64(blockSize)
	for mm < len(k.MM) && int64(k.MM[mm].Offset)+int64(k.MM[mm].Length) <= lo {
		mm++ // ends before this block, hence before every later one
	}
	// Items do not overlap (check): those from mm on that start before hi
	// are the block's.
	for j := mm; j < len(k.MM) && int64(k.MM[j].Offset) < hi; j++ {
		end = putMM(buf, end, k.MM[j].Hash, int32(int64(k.MM[j].Offset)-lo))
	}
	return end, mm
}

// putLoRA, putSalt and putMM write one extra key at buf[end:] when it
// applies and return the new end: the one encoding of extra_i, for Keys
// and for HashBlock.
func putLoRA(buf []byte, end int, id uint32) int {
	if id == 0 {
		return end
	}
	buf[end] = tagLoRA
	binary.LittleEndian.PutUint32(buf[end+1:], id)
	return end + 5
}

func putSalt(buf []byte, end int, salt []byte) int {
	if len(salt) == 0 {
		return end
	}
	buf[end] = tagSalt
	binary.LittleEndian.PutUint16(buf[end+1:], uint16(len(salt)))
	return end + 3 + copy(buf[end+3:], salt)
}

func putMM(buf []byte, end int, hash uint64, rel int32) int {
	buf[end] = tagMM
	binary.LittleEndian.PutUint64(buf[end+1:], hash)
	binary.LittleEndian.PutUint32(buf[end+9:], uint32(rel))
	return end + 13
}

// uint32Bytes views ids as little-endian bytes (a copy on big-endian machines).
func uint32Bytes(ids []uint32) []byte {
	if len(ids) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))
	}
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Chain appends the hashes of the full blocks of tokens that continue a
// chain whose last block hashed to parent (hasParent false: they start a
// prompt, as Hash). An engine that reports stored blocks with their tokens
// and their parent (vLLM's BlockStored) can be translated to this scheme
// block by block. Multimodal items are refused: Keys place them by prompt
// position, unknown here; HashBlock takes each block's own items instead.
func (h *Hasher) Chain(dst []uint64, parent uint64, hasParent bool, tokens []uint32, keys *Keys) ([]uint64, error) {
	if keys != nil && len(keys.MM) > 0 {
		return dst, fmt.Errorf("%w: multimodal items in a chained continuation", ErrBadKeys)
	}
	if !hasParent {
		hs, err := h.Hash(nil, tokens, keys)
		return append(dst, hs...), err
	}
	// Block 0's tokens are never read when hashing resumes at block 1, and
	// the salt only enters block 0: continue after a placeholder block.
	buf := make([]byte, 4*(h.blockSize+len(tokens)))
	copy(buf[4*h.blockSize:], uint32Bytes(tokens))
	var cont *Keys
	if keys != nil && keys.LoRAID != 0 {
		cont = &Keys{LoRAID: keys.LoRAID}
	}
	hs, err := h.ExtendLE([]uint64{parent}, buf, cont)
	if err != nil {
		return dst, err
	}
	return append(dst, hs[1:]...), nil
}
