package wire

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// EventKind is the kind of one KV cache event.
type EventKind uint8

// Event kinds.
const (
	EventStored  EventKind = 1 // blocks entered the cache (a chain under Parent)
	EventRemoved EventKind = 2 // blocks left the cache
	EventCleared EventKind = 3 // every block of the tier left the cache
)

var eventKindNames = [...]string{"", "STORED", "REMOVED", "CLEARED"}

// String returns the kind's name.
func (k EventKind) String() string {
	if k >= EventStored && k <= EventCleared {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EVENT_%d", uint8(k))
}

// Hashes is a read-only view of packed little-endian uint64 block hashes.
type Hashes struct{ b []byte }

// HashesOf views hashes as Hashes (shared memory on little-endian machines).
func HashesOf(hashes []uint64) Hashes {
	if len(hashes) == 0 {
		return Hashes{}
	}
	if nativeLittleEndian {
		return Hashes{b: unsafe.Slice((*byte)(unsafe.Pointer(&hashes[0])), 8*len(hashes))}
	}
	b := make([]byte, 0, 8*len(hashes))
	for _, h := range hashes {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return Hashes{b: b}
}

// Len returns the number of hashes.
func (h Hashes) Len() int { return len(h.b) / 8 }

// At returns the i-th hash.
func (h Hashes) At(i int) uint64 { return binary.LittleEndian.Uint64(h.b[8*i:]) }

// AppendTo appends the hashes to dst: one copy on little-endian machines.
func (h Hashes) AppendTo(dst []uint64) []uint64 { return appendWords(dst, h.b) }

// Event is one KV cache event. Hashes is a view into the payload when decoded.
//
//	| kind u8 | tier u8 | group u16 | n u32 |
//	STORED:  | flags u32 (bit 0: has parent) | lora_id u32 | parent u64 | hash u64 x n |
//	REMOVED: | hash u64 x n |
//	CLEARED: (n is 0, nothing follows)
type Event struct {
	Kind EventKind
	Tier Tier
	// Group is the attention group (hybrid models keep one cache per group).
	Group uint16
	// HasParent (STORED) says Parent is set; a chain from the prompt start has none.
	HasParent bool
	LoRAID    uint32
	Parent    uint64
	Hashes    Hashes
}

const (
	eventHeaderSize  = 8
	storedExtraSize  = 16
	eventHasParent   = 1 << 0
	eventListMinSize = eventHeaderSize
)

func appendEvents(e *encoder, events []Event) {
	e.u32(uint32(len(events)))
	for i := range events {
		ev := &events[i]
		e.u8(uint8(ev.Kind))
		e.u8(uint8(ev.Tier))
		e.u16(ev.Group)
		e.u32(uint32(ev.Hashes.Len()))
		if ev.Kind == EventStored {
			var fl uint32
			if ev.HasParent {
				fl = eventHasParent
			}
			e.u32(fl)
			e.u32(ev.LoRAID)
			e.u64(ev.Parent)
		}
		e.b = append(e.b, ev.Hashes.b...)
	}
}

// decodeEvents appends the event list to dst, reusing its capacity.
func decodeEvents(c *cursor, dst []Event, lim *Limits, onlyStored bool) []Event {
	n := c.count(4, eventListMinSize, lim.MaxEvents, "event count")
	for range n {
		var ev Event
		ev.Kind = EventKind(c.u8("event kind"))
		ev.Tier = Tier(c.u8("event tier"))
		ev.Group = c.u16("event group")
		nh := c.count(4, 8, lim.MaxFrameSize/8, "event hash count")
		if c.err != nil {
			return dst
		}
		if ev.Tier >= NumTiers {
			c.fail(ErrBadValue, "event tier")
			return dst
		}
		switch ev.Kind {
		case EventStored:
			fl := c.u32("event flags")
			if fl&^eventHasParent != 0 {
				c.fail(ErrBadValue, "event flags")
			}
			ev.HasParent = fl&eventHasParent != 0
			ev.LoRAID = c.u32("event lora_id")
			ev.Parent = c.u64("event parent")
		case EventRemoved:
		case EventCleared:
			if nh != 0 {
				c.fail(ErrBadValue, "CLEARED with hashes")
			}
		default:
			c.fail(ErrBadValue, "event kind")
		}
		if onlyStored && ev.Kind != EventStored {
			c.fail(ErrBadValue, "snapshot event kind")
		}
		ev.Hashes = Hashes{b: c.take(8*nh, "event hashes")}
		if c.err != nil {
			return dst
		}
		dst = append(dst, ev)
	}
	return dst
}

// KVEvents is a batch of KV cache events of one data-parallel rank. Seq grows
// by one per batch on a connection; a gap means events were lost.
//
//	| seq u64 | timestamp_ns i64 | dp_rank u16 | reserved u16 | count u32 | event x count |
type KVEvents struct {
	Seq           uint64
	TimestampNano int64
	DPRank        uint16
	Events        []Event
}

// Type implements Message.
func (*KVEvents) Type() Type { return TypeKVEvents }

// AppendPayload implements Message.
func (m *KVEvents) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u64(m.Seq)
	e.u64(uint64(m.TimestampNano))
	e.u16(m.DPRank)
	e.zero(2)
	appendEvents(&e, m.Events)
	return e.b, e.err
}

// Decode implements Message. Events reuses its capacity, so a long-lived
// KVEvents decodes without allocating once it has grown.
func (m *KVEvents) Decode(p []byte, lim *Limits) error {
	lim = limitsOrDefault(lim)
	c := cursor{b: p}
	m.Seq = c.u64("seq")
	m.TimestampNano = int64(c.u64("timestamp"))
	m.DPRank = c.u16("dp_rank")
	c.zero(2, "reserved")
	m.Events = decodeEvents(&c, m.Events[:0], lim, false)
	return c.done("KV_EVENTS")
}

// SnapshotLast marks the last chunk of a snapshot.
const SnapshotLast uint32 = 1 << 0

// Snapshot is one chunk of an engine's whole cached block set for a rank, as
// STORED events. Seq is the KV_EVENTS sequence number the snapshot reflects:
// it includes every batch up to Seq and none after.
//
//	| snapshot_id u32 | chunk u32 | flags u32 (bit 0: last) | reserved u32 |
//	| seq u64 | dp_rank u16 | reserved u16 | count u32 | STORED event x count |
type Snapshot struct {
	SnapshotID uint32
	Chunk      uint32
	Last       bool
	Seq        uint64
	DPRank     uint16
	Events     []Event
}

// Type implements Message.
func (*Snapshot) Type() Type { return TypeSnapshot }

// AppendPayload implements Message.
func (m *Snapshot) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u32(m.SnapshotID)
	e.u32(m.Chunk)
	var fl uint32
	if m.Last {
		fl = SnapshotLast
	}
	e.u32(fl)
	e.zero(4)
	e.u64(m.Seq)
	e.u16(m.DPRank)
	e.zero(2)
	for i := range m.Events {
		if m.Events[i].Kind != EventStored {
			return dst, fmt.Errorf("encoding SNAPSHOT: event %d is %s: %w", i, m.Events[i].Kind, ErrBadValue)
		}
	}
	appendEvents(&e, m.Events)
	return e.b, e.err
}

// Decode implements Message.
func (m *Snapshot) Decode(p []byte, lim *Limits) error {
	lim = limitsOrDefault(lim)
	c := cursor{b: p}
	m.SnapshotID = c.u32("snapshot_id")
	m.Chunk = c.u32("chunk")
	fl := c.u32("flags")
	if fl&^SnapshotLast != 0 {
		c.fail(ErrBadValue, "snapshot flags")
	}
	m.Last = fl&SnapshotLast != 0
	c.zero(4, "reserved")
	m.Seq = c.u64("seq")
	m.DPRank = c.u16("dp_rank")
	c.zero(2, "reserved")
	m.Events = decodeEvents(&c, m.Events[:0], lim, true)
	return c.done("SNAPSHOT")
}
