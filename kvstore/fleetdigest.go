package kvstore

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
)

// AppendEngineDigests appends what replicas compare to tell how alike their
// indexes are: for every engine, sorted by id, the id (u16 length, bytes)
// and the digest (DigestSize bytes) of every block its ranks hold in the
// precise tiers (approximate entries are each replica's own guesses):
//
//	| id length (2B LE) | id | Digest (DigestSize B) | ... next engine
//
// An engine whose id is longer than a u16 can say is left out: every
// replica leaves it out alike, so it cannot make two of them look apart.
func (ix *Index) AppendEngineDigests(b []byte) []byte {
	ix.mu.RLock()
	byEngine := map[string]*Digest{}
	for i := range ix.slots {
		st := &ix.slots[i]
		if !st.inUse || len(st.engine) > math.MaxUint16 {
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
// side knows counting as wholly different. A malformed encoding gives 0,
// and so does one that AppendEngineDigests could not have written (ids out
// of order or repeated): the bytes come from peers, and a repeated id
// would otherwise count whichever copy came last. The sums are integers,
// so the result is the same either way round and on every call.
func EngineDigestsSimilarity(a, b []byte) float64 {
	da, okA := parseEngineDigests(a)
	db, okB := parseEngineDigests(b)
	if !okA || !okB {
		return 0
	}
	var same, total uint64
	for len(da) > 0 || len(db) > 0 {
		switch {
		case len(db) == 0 || len(da) > 0 && da[0].id < db[0].id:
			total += da[0].digest.Total
			da = da[1:]
		case len(da) == 0 || db[0].id < da[0].id:
			total += db[0].digest.Total
			db = db[1:]
		default:
			x, y := &da[0].digest, &db[0].digest
			same += sameBlocks(x, y)
			total += max(x.Total, y.Total)
			da, db = da[1:], db[1:]
		}
	}
	if total == 0 {
		return 1
	}
	return float64(same) / float64(total)
}

// engineDigest is one engine's entry of an AppendEngineDigests encoding.
type engineDigest struct {
	id     string
	digest Digest
}

// parseEngineDigests decodes an AppendEngineDigests encoding in its order,
// refusing a truncated one and one whose ids are not strictly increasing.
// It allocates in proportion to len(b): each entry takes at least
// 2+DigestSize bytes.
func parseEngineDigests(b []byte) ([]engineDigest, bool) {
	out := make([]engineDigest, 0, len(b)/(2+DigestSize))
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
		id := b[2 : 2+n]
		if k := len(out); k > 0 && strings.Compare(out[k-1].id, string(id)) >= 0 {
			return nil, false
		}
		out = append(out, engineDigest{id: string(id), digest: d})
		b = b[2+n+DigestSize:]
	}
	return out, true
}
