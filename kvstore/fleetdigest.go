package kvstore

import (
	"encoding/binary"
	"slices"
)

// AppendEngineDigests appends what replicas compare to tell how alike their
// indexes are: for every engine, sorted by id, the id (u16 length, bytes)
// and the digest (DigestSize bytes) of every block its ranks hold in the
// precise tiers (approximate entries are each replica's own guesses).
func (ix *Index) AppendEngineDigests(b []byte) []byte {
	ix.mu.RLock()
	byEngine := map[string]*Digest{}
	for i := range ix.slots {
		st := &ix.slots[i]
		if !st.inUse {
			continue
		}
		d := byEngine[st.engine]
		if d == nil {
			d = &Digest{}
			byEngine[st.engine] = d
		}
		for t := TierGPU; t < TierApprox; t++ {
			d.Merge(&st.digest[t])
		}
	}
	ix.mu.RUnlock()
	ids := make([]string, 0, len(byEngine))
	for id := range byEngine {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(id)))
		b = append(b, id...)
		b = byEngine[id].AppendBinary(b)
	}
	return b
}

// EngineDigestsSimilarity compares two AppendEngineDigests encodings, 0 to
// 1: each engine's Similarity weighted by its blocks, an engine only one
// side knows counting as wholly different. A malformed encoding gives 0.
func EngineDigestsSimilarity(a, b []byte) float64 {
	da, okA := parseEngineDigests(a)
	db, okB := parseEngineDigests(b)
	if !okA || !okB {
		return 0
	}
	var same, total float64
	for id, x := range da {
		weight := float64(x.Total)
		if y, ok := db[id]; ok {
			weight = float64(max(x.Total, y.Total))
			same += Similarity(&x, &y) * weight
		}
		total += weight
	}
	for id, y := range db {
		if _, ok := da[id]; !ok {
			total += float64(y.Total)
		}
	}
	if total == 0 {
		return 1
	}
	return same / total
}

func parseEngineDigests(b []byte) (map[string]Digest, bool) {
	out := map[string]Digest{}
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, false
		}
		n := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+n+DigestSize {
			return nil, false
		}
		d, ok := UnmarshalDigest(b[2+n : 2+n+DigestSize])
		if !ok {
			return nil, false
		}
		out[string(b[2:2+n])] = d
		b = b[2+n+DigestSize:]
	}
	return out, true
}
