package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zeebo/xxh3"
)

// GenMedia: GENERATE's media section follows the hand-off section, and the
// items' bytes follow the GENERATE in MEDIA frames on its stream
// (PROTOCOL.md 6.11; only to engines with FeatureMultimodal). The encoder
// sets it whenever Generate.Media has items; callers need not.
const GenMedia GenerateFlags = 1 << 6

// MaxMIME bounds a media item's MIME type.
const MaxMIME = 127

// MediaItem is one image of a GENERATE: its content id, type and size, and
// its bytes. Item i of Generate.Media is the content of MMItems item i.
type MediaItem struct {
	// ID is the content id: XXH3-128 of Data, high half first (the 16
	// bytes of xxh3.Hash128(Data).Bytes()). Its hex is the uuid a vLLM
	// engine is given (multi_modal_uuids).
	ID [16]byte
	// MIME is the image's media type, such as "image/png".
	MIME []byte
	// Width and Height are the image's size in pixels.
	Width, Height uint32
	// Data is the image's bytes as the client sent them (still encoded:
	// PNG, JPEG...). In a GENERATE decoded from its frame alone it is nil:
	// the bytes come in MEDIA frames (MediaAssembly).
	Data []byte
}

// Key is the hash that enters block hashes for the item (MMItem.Hash):
// the low 64 bits of its id, ID[8:16] read big-endian (xxh3.Hash128's Lo).
func (it *MediaItem) Key() uint64 { return binary.BigEndian.Uint64(it.ID[8:]) }

// mediaFixed is the size of a media record without its MIME bytes.
//
//	| id [16] | width u32 | height u32 | size u32 | mime str16 |
const mediaFixed = 16 + 4 + 4 + 4 + 2

// Media is a read-only view of a GENERATE's media items: items on the
// encoding side and once assembled, the section's packed records in a
// GENERATE decoded from its frame (At walks them; Data is nil).
type Media struct {
	items []MediaItem
	recs  []byte
	n     int
}

// MediaOf makes a view of items (encoding side; items are not copied).
func MediaOf(items []MediaItem) Media { return Media{items: items, n: len(items)} }

// Len returns the number of items.
func (m Media) Len() int { return m.n }

// At returns the i-th item.
func (m Media) At(i int) MediaItem {
	if m.items != nil {
		return m.items[i]
	}
	it, _ := m.record(i)
	return it
}

// Size returns the declared byte size of item i: len(Data) on the encoding
// side, the section's size field once decoded.
func (m Media) Size(i int) int {
	if m.items != nil {
		return len(m.items[i].Data)
	}
	_, size := m.record(i)
	return size
}

// Bytes returns the sum of the items' sizes.
func (m Media) Bytes() int {
	n := 0
	m.each(func(_ int, _ MediaItem, size int) { n += size })
	return n
}

// each calls f with every item and its size, in order, walking packed
// records once (At walks from the first record on every call).
func (m Media) each(f func(i int, it MediaItem, size int)) {
	if m.items != nil {
		for i, it := range m.items {
			f(i, it, len(it.Data))
		}
		return
	}
	r := m.recs
	for i := range m.n {
		it, size, next := readRecord(r)
		f(i, it, size)
		r = next
	}
}

// record reads packed record i (the records were checked when decoded).
func (m Media) record(i int) (MediaItem, int) {
	r := m.recs
	for ; i > 0; i-- {
		_, _, r = readRecord(r)
	}
	it, size, _ := readRecord(r)
	return it, size
}

// readRecord reads the record at the start of r and returns the rest.
func readRecord(r []byte) (it MediaItem, size int, rest []byte) {
	copy(it.ID[:], r)
	it.Width, it.Height = binary.LittleEndian.Uint32(r[16:]), binary.LittleEndian.Uint32(r[20:])
	n := int(binary.LittleEndian.Uint16(r[mediaFixed-2:]))
	it.MIME = r[mediaFixed : mediaFixed+n : mediaFixed+n]
	return it, int(binary.LittleEndian.Uint32(r[24:])), r[mediaFixed+n:]
}

// size is the encoded section's length.
func (m Media) size() int {
	n := 4
	m.each(func(_ int, it MediaItem, _ int) { n += mediaFixed + len(it.MIME) })
	return n
}

// append writes the media section:
//
//	| n u16 | reserved u16 | n x (id [16] | width u32 | height u32 | size u32 | mime str16) |
func (m Media) append(e *encoder) {
	if !e.fits(m.n, math.MaxUint16, "media") {
		return
	}
	e.u16(uint16(m.n))
	e.zero(2)
	m.each(func(_ int, it MediaItem, size int) {
		if !e.fits(size, math.MaxUint32, "media size") {
			return
		}
		e.b = append(e.b, it.ID[:]...)
		e.u32(it.Width)
		e.u32(it.Height)
		e.u32(uint32(size))
		e.str16(it.MIME, "media mime")
	})
}

// decode reads the media section as a view of its records, checking each
// record and the sizes against lim; nothing is allocated.
func (m *Media) decode(c *cursor, lim *Limits) {
	n := c.count(2, mediaFixed, lim.MaxListItems, "media")
	c.zero(2, "media reserved")
	start := c.off
	total := 0
	for i := range n {
		c.take(mediaFixed-2, "media item")
		mime := c.str16("media mime")
		if c.err != nil {
			return
		}
		r := c.b[c.off-len(mime)-mediaFixed:]
		w, h, size := binary.LittleEndian.Uint32(r[16:]), binary.LittleEndian.Uint32(r[20:]), int(binary.LittleEndian.Uint32(r[24:]))
		switch {
		case size == 0 || w == 0 || h == 0:
			c.fail(fmt.Errorf("media item %d: size %d, %dx%d pixels: %w", i, size, w, h, ErrBadValue), "media")
		case size > lim.mediaItemBytes():
			c.fail(fmt.Errorf("media item %d: %d bytes over %d: %w", i, size, lim.mediaItemBytes(), ErrLimit), "media")
		case !validMIME(mime):
			c.fail(fmt.Errorf("media item %d: mime %q: %w", i, mime, ErrBadValue), "media")
		}
		total += size
	}
	if total > lim.mediaBytes() {
		c.fail(fmt.Errorf("%d media bytes over %d: %w", total, lim.mediaBytes(), ErrLimit), "media")
	}
	if c.err != nil {
		return
	}
	*m = Media{recs: c.b[start:c.off:c.off], n: n}
}

// validMIME accepts 1 to MaxMIME bytes of printable ASCII without spaces.
func validMIME(b []byte) bool {
	if len(b) == 0 || len(b) > MaxMIME {
		return false
	}
	for _, v := range b {
		if v <= 0x20 || v >= 0x7f {
			return false
		}
	}
	return true
}

// checkMMOrder refuses mm items that are empty, or out of order or
// overlapping: each starts at or after the end of the one before it.
func (m *Generate) checkMMOrder() error {
	prev := uint64(0)
	for i := range m.MMItems.Len() {
		it := m.MMItems.At(i)
		if uint64(it.Offset) < prev {
			return fmt.Errorf("mm item %d at %d overlaps or precedes the item before it: %w", i, it.Offset, ErrBadValue)
		}
		if it.Length == 0 {
			return fmt.Errorf("mm item %d is empty: %w", i, ErrBadValue)
		}
		prev = uint64(it.Offset) + uint64(it.Length)
	}
	return nil
}

// validateMedia checks the pairing of a decoded GENERATE's media with its
// mm_items, and the items' order (PROTOCOL.md 6.11).
func (m *Generate) validateMedia() error {
	if err := m.checkMMOrder(); err != nil {
		return fmt.Errorf("decoding GENERATE: %w", err)
	}
	if m.Flags&GenMedia == 0 {
		return nil
	}
	if m.Media.Len() == 0 || m.Media.Len() != m.MMItems.Len() {
		return fmt.Errorf("decoding GENERATE: %d media items for %d mm items: %w", m.Media.Len(), m.MMItems.Len(), ErrBadValue)
	}
	return nil
}

// wireFlags are the flags GENERATE carries: Flags, with GenMedia when
// there is media.
func (m *Generate) wireFlags() GenerateFlags {
	if m.Media.Len() > 0 {
		return m.Flags | GenMedia
	}
	return m.Flags
}

// checkMediaLimits reports, for a sender, what a receiver with limits lim
// would refuse in m's media: a count that does not pair with mm_items, an
// item without bytes or size, a bad MIME type (ErrBadValue), or bytes over
// the item or request limit (ErrLimit).
func (m *Generate) checkMediaLimits(lim *Limits) error {
	if m.Media.Len() == 0 {
		return nil
	}
	if m.Media.Len() != m.MMItems.Len() {
		return fmt.Errorf("GENERATE media: %d items for %d mm items: %w", m.Media.Len(), m.MMItems.Len(), ErrBadValue)
	}
	if err := m.checkMMOrder(); err != nil {
		return fmt.Errorf("GENERATE %w", err)
	}
	total := 0
	for i := range m.Media.Len() {
		it, size := m.Media.At(i), m.Media.Size(i)
		switch {
		case size == 0 || it.Width == 0 || it.Height == 0:
			return fmt.Errorf("GENERATE media item %d: %d bytes, %dx%d pixels: %w", i, size, it.Width, it.Height, ErrBadValue)
		case !validMIME(it.MIME):
			return fmt.Errorf("GENERATE media item %d: mime %q: %w", i, it.MIME, ErrBadValue)
		case size > lim.mediaItemBytes():
			return fmt.Errorf("GENERATE media item %d: %d bytes over %d: %w", i, size, lim.mediaItemBytes(), ErrLimit)
		}
		total += size
	}
	if total > lim.mediaBytes() {
		return fmt.Errorf("GENERATE media: %d bytes over %d: %w", total, lim.mediaBytes(), ErrLimit)
	}
	return nil
}

// CheckFeatures reports what in m an engine that announced features f
// must never get: multimodal items or media without FeatureMultimodal.
// The error names the feature and wraps ErrUnexpectedFrame.
func (m *Generate) CheckFeatures(f Feature) error {
	if f&FeatureMultimodal == 0 && (m.MMItems.Len() > 0 || m.Media.Len() > 0) {
		return fmt.Errorf("GENERATE with %d images to an engine without MULTIMODAL (feature bit 8): %w", max(m.MMItems.Len(), m.Media.Len()), ErrUnexpectedFrame)
	}
	return nil
}

// CheckMedia is what an engine MUST check in an assembled GENERATE before
// running it (PROTOCOL.md 6.11): every mm item has its media item, each
// item's bytes are all there and hash to its content id (XXH3-128), and
// each mm item's hash is its media's Key. The error names the first item
// that fails and wraps ErrBadValue (a stream ERROR BAD_REQUEST).
func CheckMedia(g *Generate) error {
	if g.MMItems.Len() != g.Media.Len() {
		return fmt.Errorf("GENERATE has %d mm items and %d media items: %w", g.MMItems.Len(), g.Media.Len(), ErrBadValue)
	}
	for i := range g.Media.Len() {
		it := g.Media.At(i)
		if len(it.Data) != g.Media.Size(i) {
			return fmt.Errorf("media item %d: %d of its %d bytes arrived: %w", i, len(it.Data), g.Media.Size(i), ErrBadValue)
		}
		if id := xxh3.Hash128(it.Data).Bytes(); id != it.ID {
			return fmt.Errorf("media item %d: content id %x is not the XXH3-128 of its %d bytes (%x): %w", i, it.ID, len(it.Data), id, ErrBadValue)
		}
		if h := g.MMItems.At(i).Hash; h != it.Key() {
			return fmt.Errorf("mm item %d: hash %#016x is not its media's key %#016x: %w", i, h, it.Key(), ErrBadValue)
		}
	}
	return nil
}
