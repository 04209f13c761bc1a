package syncring

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// kind is a ring message's first byte (RING.md). Kind 1 was format 1's
// HEARTBEAT, without engine keys; it is no longer sent or accepted.
type kind uint8

const (
	kindHeartbeat kind = 5
	kindChunk     kind = 2
	kindReserve   kind = 3
	kindDigest    kind = 4
)

// Ring all-reduce phases.
const (
	phaseReduceScatter uint8 = 0
	phaseAllGather     uint8 = 1
)

// Decoding limits: a peer cannot make a replica hold more than this.
const (
	maxChunkValues  = 1 << 20
	maxReserveItems = 1 << 16
	maxDigestBytes  = 1 << 20
	maxHears        = 1 << 12
)

var errMalformed = errors.New("syncring: malformed ring message")

// heartbeat says a replica is alive and what it sees (RING.md, HEARTBEAT).
type heartbeat struct {
	Incarnation     uint64 // the sender's start time; a restart is a new member
	Engines         uint64 // hash of EngineKeys (for operators and quick comparison)
	EpochNum        uint64 // how many epochs the sender has been through
	RoundsDone      uint64
	RoundsAbandoned uint64
	RoundMicros     uint32 // the sender's last round latency
	RoundBytes      uint32 // bytes the sender sent in its last round
	ViewTokens      uint64 // queued prefill + active decode tokens in the sender's global view
	// Hears lists the peers the sender hears from; a ring forms only among
	// replicas that hear each other, so a one-way partition excludes a peer
	// on both sides instead of stalling every round.
	Hears []string
	// EngineKeys are the sender's engine keys, sorted, distinct: the ring
	// reduces over the keys all members list (engines.go).
	EngineKeys []string
}

// chunk is one step of a ring all-reduce: a slice of the load vector.
type chunk struct {
	Round  uint64
	Phase  uint8
	Step   uint16
	Index  uint16  // which chunk of the vector
	Values []int64 // decoded (delta undone by the receiving link)
}

// reservation is one change of the sender's load on an engine: a routing
// decision (prefill and a request added), a first token (prefill moved to
// decode) or a request's end (released).
type reservation struct {
	Engine uint32
	Load
}

// reserveBatch is the reservations a sender made in one millisecond. Tag is
// the sender's snapshot number that will first include them (RING.md).
type reserveBatch struct {
	Tag   uint64
	Items []reservation
}

// message is a decoded ring message.
type message struct {
	Kind      kind
	Epoch     uint64
	Heartbeat heartbeat
	Chunk     chunk
	Reserve   reserveBatch
	Digest    []byte
}

func appendHeader(b []byte, k kind, epoch uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, byte(k)), epoch)
}

func appendHeartbeat(b []byte, epoch uint64, h *heartbeat) []byte {
	b = appendHeader(b, kindHeartbeat, epoch)
	for _, v := range []uint64{h.Incarnation, h.Engines, h.EpochNum, h.RoundsDone, h.RoundsAbandoned} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, h.RoundMicros)
	b = binary.LittleEndian.AppendUint32(b, h.RoundBytes)
	b = binary.LittleEndian.AppendUint64(b, h.ViewTokens)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.Hears)))
	for _, id := range h.Hears {
		b = append(b, byte(len(id)))
		b = append(b, id[:min(len(id), 255)]...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.EngineKeys)))
	for _, k := range h.EngineKeys {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	return b
}

// appendChunk encodes values as zigzag varint deltas against base (nil: zeros).
func appendChunk(b []byte, epoch uint64, c *chunk, base []int64) []byte {
	b = appendHeader(b, kindChunk, epoch)
	b = binary.LittleEndian.AppendUint64(b, c.Round)
	b = append(b, c.Phase)
	b = binary.LittleEndian.AppendUint16(b, c.Step)
	b = binary.LittleEndian.AppendUint16(b, c.Index)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Values)))
	return appendDeltas(b, c.Values, base)
}

func appendReserve(b []byte, epoch uint64, r *reserveBatch) []byte {
	b = appendHeader(b, kindReserve, epoch)
	b = binary.LittleEndian.AppendUint64(b, r.Tag)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Items)))
	for _, it := range r.Items {
		b = binary.AppendUvarint(b, uint64(it.Engine))
		b = binary.AppendVarint(b, it.PrefillTokens)
		b = binary.AppendVarint(b, it.DecodeTokens)
		b = binary.AppendVarint(b, it.Requests)
	}
	return b
}

func appendDigest(b []byte, epoch uint64, d []byte) []byte {
	b = appendHeader(b, kindDigest, epoch)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	return append(b, d...)
}

// decoder reads a ring body; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = errMalformed
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a u32 count and checks it against max and against the bytes
// left (each item takes at least minBytes), before anything is allocated.
func (d *decoder) count(max, minBytes int) int {
	n := int(d.u32())
	if d.err == nil && (n > max || n*minBytes > len(d.b)) {
		d.err = errMalformed
		return 0
	}
	return n
}

// decodeMessage parses a ring body. Chunk values are decoded as deltas
// against base(index, phase, n), which the receiving link keeps; values is
// reused when large enough. Nothing in m aliases body.
func decodeMessage(body []byte, m *message, base func(c *chunk, n int) []int64) error {
	d := decoder{b: body}
	m.Kind, m.Epoch = kind(d.u8()), d.u64()
	switch m.Kind {
	case kindHeartbeat:
		h := &m.Heartbeat
		h.Incarnation, h.Engines, h.EpochNum, h.RoundsDone, h.RoundsAbandoned = d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
		h.RoundMicros, h.RoundBytes, h.ViewTokens = d.u32(), d.u32(), d.u64()
		n := d.count(maxHears, 1)
		h.Hears = h.Hears[:0]
		for range n {
			h.Hears = append(h.Hears, string(d.take(int(d.u8()))))
		}
		n = d.count(maxEngineKeys, 2)
		h.EngineKeys = h.EngineKeys[:0]
		for i := range n {
			k := string(d.take(int(d.u16())))
			if d.err == nil && (k == "" || i > 0 && k <= h.EngineKeys[i-1]) {
				d.err = errMalformed // sorted and distinct, or a receiver's intersection breaks
			}
			h.EngineKeys = append(h.EngineKeys, k)
		}
	case kindChunk:
		c := &m.Chunk
		c.Round, c.Phase, c.Step, c.Index = d.u64(), d.u8(), d.u16(), d.u16()
		n := d.count(maxChunkValues, 1)
		if d.err == nil && c.Phase > phaseAllGather {
			d.err = errMalformed
		}
		if d.err != nil {
			break
		}
		c.Values = growInt64(c.Values, n)
		d.b, d.err = decodeDeltas(d.b, c.Values, base(c, n))
	case kindReserve:
		r := &m.Reserve
		r.Tag = d.u64()
		n := d.count(maxReserveItems, 4)
		r.Items = r.Items[:0]
		for range n {
			e := d.uvarint()
			it := reservation{Engine: uint32(e), Load: Load{PrefillTokens: d.varint(), DecodeTokens: d.varint(), Requests: d.varint()}}
			if e > 1<<31 {
				d.err = errMalformed
			}
			r.Items = append(r.Items, it)
		}
	case kindDigest:
		n := d.count(maxDigestBytes, 1)
		m.Digest = append(m.Digest[:0], d.take(n)...)
	default:
		return fmt.Errorf("syncring: unknown message kind %d: %w", m.Kind, errMalformed)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errMalformed // trailing bytes
	}
	if d.err != nil {
		return fmt.Errorf("syncring: decoding %s: %w", m.Kind, d.err)
	}
	return nil
}

func (k kind) String() string {
	switch k {
	case kindHeartbeat:
		return "HEARTBEAT"
	case kindChunk:
		return "CHUNK"
	case kindReserve:
		return "RESERVE"
	case kindDigest:
		return "DIGEST"
	}
	return fmt.Sprintf("KIND_%d", uint8(k))
}

func growInt64(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	return s[:n]
}
