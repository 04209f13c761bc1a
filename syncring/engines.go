package syncring

import (
	"slices"

	"github.com/zeebo/xxh3"
)

// Replicas agree on engines by key (the daemon uses each engine's
// handshake id), not by position: every HEARTBEAT lists the sender's
// engine keys, and a ring's load vector covers the keys that every member
// has, sorted (the shared set). Replicas whose engine sets differ for a
// while (a DNS update seen at different moments) keep their ring and
// reduce over what they share; the shared set is part of the epoch, so a
// change of any member's set starts a new epoch, and the views converge as
// soon as the heartbeats carrying the new sets have crossed (RING.md).
//
// The caller indexes engines by its own positions (Config.Engines,
// SetEngines: key i is the engine at position i, "" for a free position);
// the loop maps them to vector positions once per epoch.

// maxEngineKeys bounds the keys a HEARTBEAT may carry (and a replica may
// announce), and maxKeyLen each key's length.
const (
	maxEngineKeys = 1 << 14
	maxKeyLen     = 1<<16 - 1
)

// vectorMap is one epoch's map from the caller's engine positions to
// vector positions (-1: not shared), published for Reserve.
type vectorMap struct {
	epoch uint64
	posOf []int32
}

// enginesChanged hands the loop a new engine list (SetEngines).
type enginesChanged struct{ keys []string }

// SetEngines replaces this replica's engines: keys[i] is the key of the
// engine at the caller's position i ("" for none), as in Config.Engines;
// a key listed twice counts at its first position only. Peers learn the
// set at once (a HEARTBEAT), and the ring re-forms over the keys all
// members share. The ring keeps its own copy of keys.
func (r *Ring) SetEngines(keys []string) {
	r.post(r.root, enginesChanged{keys: slices.Clone(keys)})
}

// localKeys returns the sorted distinct keys of a caller's list.
func localKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" && len(k) <= maxKeyLen {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxEngineKeys {
		out = out[:maxEngineKeys]
	}
	return out
}

// engineSetHash identifies a sorted key set.
func engineSetHash(sorted []string) uint64 {
	h := xxh3.New()
	for _, k := range sorted {
		_, _ = h.WriteString(k)
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// setEngines takes a new engine list from the caller: the own-load buffer
// grows to it, peers hear of it, and the ring re-forms if the shared set
// changed.
func (s *loopState) setEngines(keys []string) {
	s.keys = keys
	s.local = localKeys(keys)
	if len(s.own) < len(keys) {
		s.own = append(s.own, make([]Load, len(keys)-len(s.own))...)
	}
	for _, p := range s.peers {
		if p.link != nil {
			s.sendHeartbeat(p)
		}
	}
	s.reform()
	s.remap() // the same shared keys may sit at other caller positions now
}

// sharedKeys is the sorted intersection of this replica's keys and every
// other member's last announced keys.
func (s *loopState) sharedKeys(members []string) []string {
	shared := slices.Clone(s.local)
	for _, id := range members {
		if id == s.r.cfg.ID {
			continue
		}
		theirs := s.peers[id].hb.EngineKeys
		shared = slices.DeleteFunc(shared, func(k string) bool {
			_, ok := slices.BinarySearch(theirs, k)
			return !ok
		})
	}
	return shared
}

// remap lays the shared keys out as the epoch's vector: order maps vector
// positions to the caller's positions, and the published vectorMap the
// other way, for Reserve.
func (s *loopState) remap() {
	s.order = s.order[:0]
	posOf := make([]int32, len(s.keys))
	for i := range posOf {
		posOf[i] = -1
	}
	first := map[string]int{}
	for i, k := range s.keys {
		if _, dup := first[k]; !dup && k != "" {
			first[k] = i
		}
	}
	for k, key := range s.shared {
		ci := first[key]
		s.order = append(s.order, ci)
		posOf[ci] = int32(k)
	}
	s.r.vmap.Store(&vectorMap{epoch: s.epoch, posOf: posOf})
}
