package kvstore

import "encoding/binary"

// DigestBuckets is the number of buckets of a Digest.
const DigestBuckets = 64

// Digest summarises a set of block hashes so that two replicas can tell how
// similar their views of an engine are without exchanging the index. Hashes
// fall into DigestBuckets buckets by their low bits; each bucket keeps a count
// and the wrapping sum of its hashes. Adding and removing a hash are O(1)
// and exact inverses, so the digest is maintained incrementally and is
// independent of event order.
type Digest struct {
	Count [DigestBuckets]uint32
	Sum   [DigestBuckets]uint64
	Total uint64
}

func (d *Digest) add(h uint64) {
	b := h % DigestBuckets
	d.Count[b]++
	d.Sum[b] += h
	d.Total++
}

func (d *Digest) remove(h uint64) {
	b := h % DigestBuckets
	d.Count[b]--
	d.Sum[b] -= h
	d.Total--
}

// Merge adds o's blocks to d (for a digest of several tiers or ranks).
func (d *Digest) Merge(o *Digest) {
	for b := range DigestBuckets {
		d.Count[b] += o.Count[b]
		d.Sum[b] += o.Sum[b]
	}
	d.Total += o.Total
}

// Similarity estimates how alike two block sets are, from 0 to 1: the blocks
// in buckets that agree exactly, over the larger set. Equal sets give 1; each
// differing block costs at most its bucket, so a few differences in a large
// set cost a few sixty-fourths at worst.
func Similarity(a, b *Digest) float64 {
	if a.Total == 0 && b.Total == 0 {
		return 1
	}
	return float64(sameBlocks(a, b)) / float64(max(a.Total, b.Total))
}

// sameBlocks counts the blocks in buckets on which a and b agree exactly.
func sameBlocks(a, b *Digest) uint64 {
	var same uint64
	for i := range DigestBuckets {
		if a.Count[i] == b.Count[i] && a.Sum[i] == b.Sum[i] {
			same += uint64(a.Count[i])
		}
	}
	return same
}

// DigestSize is the size of a marshalled Digest.
const DigestSize = DigestBuckets * 12

// AppendBinary appends the digest as DigestBuckets x (count u32, sum u64), little-endian.
func (d *Digest) AppendBinary(b []byte) []byte {
	for i := range DigestBuckets {
		b = binary.LittleEndian.AppendUint32(b, d.Count[i])
		b = binary.LittleEndian.AppendUint64(b, d.Sum[i])
	}
	return b
}

// UnmarshalDigest decodes what AppendBinary wrote.
func UnmarshalDigest(b []byte) (Digest, bool) {
	var d Digest
	if len(b) != DigestSize {
		return d, false
	}
	for i := range DigestBuckets {
		d.Count[i] = binary.LittleEndian.Uint32(b[12*i:])
		d.Sum[i] = binary.LittleEndian.Uint64(b[12*i+4:])
		d.Total += uint64(d.Count[i])
	}
	return d, true
}

// Digest returns the digest of the blocks a slot holds in a tier (TierApprox
// included).
func (ix *Index) Digest(slot Slot, t Tier) (Digest, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if err := ix.checkSlot(slot); err != nil || t >= numTiers {
		return Digest{}, ErrUnknownSlot
	}
	return ix.slots[slot].digest[t], nil
}
