package kvstore

import "fmt"

// Tier is a KV cache tier, best first. TierApprox is not a real tier: it
// marks blocks the router believes an engine holds because it sent them there.
type Tier uint8

// Tiers.
const (
	TierGPU    Tier = 0
	TierCPU    Tier = 1
	TierDisk   Tier = 2
	TierApprox Tier = 3
	// NumTiers counts the real tiers.
	NumTiers = 3
	numTiers = 4 // with TierApprox
)

var tierNames = [numTiers]string{"gpu", "cpu", "disk", "approx"}

// String returns the tier's name.
func (t Tier) String() string {
	if t < numTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("tier_%d", uint8(t))
}

// EventKind is the kind of a KV cache event.
type EventKind uint8

// Event kinds, as in the wire protocol.
const (
	Stored  EventKind = 1
	Removed EventKind = 2
	Cleared EventKind = 3
)

var eventKindNames = [...]string{"", "stored", "removed", "cleared"}

// String returns the kind's name.
func (k EventKind) String() string {
	if k >= Stored && k <= Cleared {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event_%d", uint8(k))
}

// Event is one KV cache event of one slot. Parent is informational: block
// hashes are chained, so a block's hash already names its whole prefix.
type Event struct {
	Kind EventKind
	Tier Tier
	// Group is the KV cache group of a hybrid engine (EngineConfig.Groups);
	// 0 for an engine without groups. CLEARED clears the tier of every
	// group.
	Group     uint16
	HasParent bool
	Parent    uint64
	Hashes    []uint64
}
