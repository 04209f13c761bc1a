package vllm

import (
	"encoding/binary"
	"fmt"
)

// maxDepth bounds msgpack nesting (a batch needs four levels).
const maxDepth = 16

// checkShape walks a msgpack value without allocating and fails when a
// declared length exceeds the bytes left, nesting is deeper than maxDepth,
// or bytes trail the value. The msgpack library allocates what a length
// declares before reading it (found by FuzzDecodeBatch: a 7-byte message
// asked for gigabytes), so untrusted batches pass here first; after it, no
// allocation is more than a small multiple of the message.
func checkShape(b []byte) error {
	end, err := skipValue(b, 0, 0)
	if err == nil && end != len(b) {
		err = fmt.Errorf("%d trailing bytes", len(b)-end)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errSchema, err)
	}
	return nil
}

// skipValue returns the offset after the value at off.
func skipValue(b []byte, off, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if off >= len(b) {
		return 0, fmt.Errorf("truncated at %d", off)
	}
	c := b[off]
	off++
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixint, nil, bool
		return off, nil
	case c >= 0x80 && c <= 0x8f:
		return skipItems(b, off, 2*int(c&0x0f), depth)
	case c >= 0x90 && c <= 0x9f:
		return skipItems(b, off, int(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		return skipBytes(b, off, int(c&0x1f))
	}
	switch c {
	case 0xcc, 0xd0:
		return skipBytes(b, off, 1)
	case 0xcd, 0xd1:
		return skipBytes(b, off, 2)
	case 0xca, 0xce, 0xd2:
		return skipBytes(b, off, 4)
	case 0xcb, 0xcf, 0xd3:
		return skipBytes(b, off, 8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 (+ type byte)
		return skipBytes(b, off, 1+(1<<(c-0xd4)))
	case 0xc4, 0xd9: // bin8, str8
		n, off, err := length(b, off, 1)
		return skipN(b, off, n, err)
	case 0xc5, 0xda:
		n, off, err := length(b, off, 2)
		return skipN(b, off, n, err)
	case 0xc6, 0xdb:
		n, off, err := length(b, off, 4)
		return skipN(b, off, n, err)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, type, data
		n, off, err := length(b, off, 1<<(c-0xc7))
		return skipN(b, off, n+1, err)
	case 0xdc, 0xdd: // array16/32
		n, off, err := length(b, off, 2<<(c-0xdc))
		if err != nil {
			return 0, err
		}
		return skipItems(b, off, n, depth)
	case 0xde, 0xdf: // map16/32
		n, off, err := length(b, off, 2<<(c-0xde))
		if err != nil {
			return 0, err
		}
		return skipItems(b, off, 2*n, depth)
	}
	return 0, fmt.Errorf("invalid byte %#x at %d", c, off-1)
}

func length(b []byte, off, size int) (int, int, error) {
	if off+size > len(b) {
		return 0, 0, fmt.Errorf("truncated length at %d", off)
	}
	switch size {
	case 1:
		return int(b[off]), off + 1, nil
	case 2:
		return int(binary.BigEndian.Uint16(b[off:])), off + 2, nil
	}
	return int(binary.BigEndian.Uint32(b[off:])), off + 4, nil
}

func skipN(b []byte, off, n int, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return skipBytes(b, off, n)
}

func skipBytes(b []byte, off, n int) (int, error) {
	if n < 0 || n > len(b)-off {
		return 0, fmt.Errorf("%d bytes declared at %d, %d left", n, off, len(b)-off)
	}
	return off + n, nil
}

// skipItems skips n values; every value takes at least a byte, so a count
// beyond the bytes left is refused before looping.
func skipItems(b []byte, off, n, depth int) (int, error) {
	if n > len(b)-off {
		return 0, fmt.Errorf("%d items declared at %d, %d bytes left", n, off, len(b)-off)
	}
	var err error
	for range n {
		if off, err = skipValue(b, off, depth+1); err != nil {
			return 0, err
		}
	}
	return off, nil
}
