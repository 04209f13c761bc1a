package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// cursor reads little-endian fields from a payload. The first failure sticks
// in err and every later read returns zero values, so decoders check err once
// at the end. Slices it returns are views into the payload.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) fail(err error, what string) {
	if c.err == nil {
		c.err = fmt.Errorf("decoding %s at byte %d: %w", what, c.off, err)
	}
}

func (c *cursor) take(n int, what string) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b)-c.off {
		c.fail(ErrTruncated, what)
		return nil
	}
	v := c.b[c.off : c.off+n : c.off+n]
	c.off += n
	return v
}

func (c *cursor) u8(what string) uint8 {
	if b := c.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (c *cursor) u16(what string) uint16 {
	if b := c.take(2, what); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (c *cursor) u32(what string) uint32 {
	if b := c.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (c *cursor) u64(what string) uint64 {
	if b := c.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (c *cursor) f32(what string) float32 { return math.Float32frombits(c.u32(what)) }

// zero reads n reserved bytes that must be zero.
func (c *cursor) zero(n int, what string) {
	for _, v := range c.take(n, what) {
		if v != 0 {
			c.fail(ErrBadValue, what+" (reserved, must be zero)")
			return
		}
	}
}

// str16 reads a u16 length and that many bytes.
func (c *cursor) str16(what string) []byte { return c.take(int(c.u16(what)), what) }

// bytes32 reads a u32 length and that many bytes, bounded by the payload.
func (c *cursor) bytes32(what string) []byte { return c.take(int(c.u32(what)), what) }

// count reads a count of items of at least minSize bytes each and checks it
// against limit and against the bytes left, before anyone allocates for it.
func (c *cursor) count(width int, minSize int, limit int, what string) int {
	var n int
	switch width {
	case 1:
		n = int(c.u8(what))
	case 2:
		n = int(c.u16(what))
	default:
		n = int(c.u32(what))
	}
	if c.err != nil {
		return 0
	}
	if n > limit {
		c.fail(fmt.Errorf("%d items over %d: %w", n, limit, ErrLimit), what)
		return 0
	}
	if minSize > 0 && n > (len(c.b)-c.off)/minSize {
		c.fail(ErrTruncated, what)
		return 0
	}
	return n
}

// tokens reads a u32 count and that many packed token ids as a view.
func (c *cursor) tokens(limit int, what string) Tokens {
	n := c.count(4, 4, limit, what)
	return Tokens{b: c.take(4*n, what)}
}

// done fails with ErrTrailingBytes unless the whole payload was read.
func (c *cursor) done(what string) error {
	if c.err == nil && c.off != len(c.b) {
		c.fail(ErrTrailingBytes, what)
	}
	return c.err
}

// encoder appends little-endian fields. Like cursor, its first failure (a
// string or list too long for its length field) sticks in err.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) f32(v float32) {
	e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(v))
}
func (e *encoder) zero(n int) {
	for range n {
		e.b = append(e.b, 0)
	}
}

// fits records an error when n does not fit a length field of max.
func (e *encoder) fits(n, max int, what string) bool {
	if n > max {
		if e.err == nil {
			e.err = fmt.Errorf("encoding %s: %d over %d: %w", what, n, max, ErrLimit)
		}
		return false
	}
	return true
}

func (e *encoder) str16(s []byte, what string) {
	if e.fits(len(s), math.MaxUint16, what) {
		e.u16(uint16(len(s)))
		e.b = append(e.b, s...)
	}
}

func (e *encoder) bytes32(s []byte, what string) {
	if e.fits(len(s), math.MaxUint32, what) {
		e.u32(uint32(len(s)))
		e.b = append(e.b, s...)
	}
}

func (e *encoder) tokens(t Tokens) {
	e.u32(uint32(t.Len()))
	e.b = append(e.b, t.b...)
}
