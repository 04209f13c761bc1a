package wire

import "fmt"

// FeatureAdapters, in a HELLO, says the dialer reads ADAPTERS frames; in a
// WELCOME, that the engine loads LoRA adapters at run time and sends
// ADAPTERS: its slots and resident adapters at once, then every change as it
// happens (PROTOCOL.md 6.9). An engine sends ADAPTERS only to a dialer whose
// HELLO set the bit, so routers from before the frame never meet it.
const FeatureAdapters Feature = 1 << 15

// TypeAdapters is the ADAPTERS frame: an engine rank's LoRA residency.
const TypeAdapters Type = 0x25

// AdapterChange says what an ADAPTERS frame reports.
type AdapterChange uint8

// Adapter changes.
const (
	// AdaptersResident lists every adapter resident on the rank now; it
	// replaces what the receiver knew (sent first, and on any doubt).
	AdaptersResident AdapterChange = 0
	// AdaptersLoaded: the listed adapters were loaded; LoadNanos is how
	// long the load took.
	AdaptersLoaded AdapterChange = 1
	// AdaptersUnloaded: the listed adapters were unloaded on request.
	AdaptersUnloaded AdapterChange = 2
	// AdaptersEvicted: the listed adapters were evicted to free a slot.
	AdaptersEvicted   AdapterChange = 3
	numAdapterChanges               = 4
)

var adapterChangeNames = [numAdapterChanges]string{"resident", "loaded", "unloaded", "evicted"}

// String returns the change's name.
func (c AdapterChange) String() string {
	if c < numAdapterChanges {
		return adapterChangeNames[c]
	}
	return fmt.Sprintf("adapter_change_%d", uint8(c))
}

// Adapters is the ADAPTERS frame (PROTOCOL.md 6.9):
//
//	| dp_rank u16 | change u8 | reserved u8 | slots u16 | reserved u16 |
//	| load_ns u64 | adapters u16 n | reserved [6] | (lora_id u32, name str16) x n |
//
// slots is how many adapters the rank holds at once (vLLM's --max-loras);
// the list is every resident adapter (AdaptersResident) or the ones the
// change is about. lora_id 0, the base model, is never listed.
type Adapters struct {
	DPRank uint16
	Change AdapterChange
	Slots  uint16
	// LoadNanos is, for AdaptersLoaded, the time the load took (0
	// otherwise).
	LoadNanos uint64
	LoRAs     []LoRA
}

// Type implements Message.
func (*Adapters) Type() Type { return TypeAdapters }

// AppendPayload implements Message.
func (m *Adapters) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u16(m.DPRank)
	e.u8(uint8(m.Change))
	e.zero(1)
	e.u16(m.Slots)
	e.zero(2)
	e.u64(m.LoadNanos)
	if e.fits(len(m.LoRAs), 0xffff, "adapters") {
		e.u16(uint16(len(m.LoRAs)))
		e.zero(6)
		for _, l := range m.LoRAs {
			e.u32(l.ID)
			e.str16([]byte(l.Name), "adapter name")
		}
	}
	return e.b, e.err
}

// Decode implements Message. LoRAs reuses its capacity; names are copied.
func (m *Adapters) Decode(p []byte, lim *Limits) error {
	lim = limitsOrDefault(lim)
	c := cursor{b: p}
	m.DPRank = c.u16("dp_rank")
	m.Change = AdapterChange(c.u8("change"))
	if m.Change >= numAdapterChanges {
		c.fail(ErrBadValue, "change")
	}
	c.zero(1, "reserved")
	m.Slots = c.u16("slots")
	c.zero(2, "reserved")
	m.LoadNanos = c.u64("load_ns")
	n := c.count(2, 6, lim.MaxListItems, "adapters")
	c.zero(6, "reserved")
	m.LoRAs = m.LoRAs[:0]
	for range n {
		l := LoRA{ID: c.u32("lora id"), Name: string(c.str16("adapter name"))}
		if l.ID == 0 && c.err == nil {
			c.fail(ErrBadValue, "lora id")
		}
		m.LoRAs = append(m.LoRAs, l)
	}
	return c.done("ADAPTERS")
}
