package gguf

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
)

// GGUF constants (ggml/include/gguf.h).
const (
	magic     = "GGUF"
	version   = 3
	alignment = 32
)

// Value types of KV pairs (enum gguf_type).
const (
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
)

// kv is one metadata pair; value is a uint32, int32, float32, bool, string,
// []string or []int32.
type kv struct {
	key   string
	value any
}

// encoder writes GGUF's little-endian primitives and remembers the first
// error, so the layout code reads as the layout.
type encoder struct {
	w   *bufio.Writer
	n   int64 // bytes written
	err error
	buf [8]byte
}

func newEncoder(w io.Writer) *encoder { return &encoder{w: bufio.NewWriterSize(w, 1<<20)} }

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(b)
	e.n += int64(n)
}

func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:4], v); e.write(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:8], v); e.write(e.buf[:8]) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		var n int
		n, e.err = e.w.WriteString(s)
		e.n += int64(n)
	}
}

// pad writes zeros up to the next multiple of the alignment.
func (e *encoder) pad() {
	var zeros [alignment]byte
	if r := e.n % alignment; r != 0 {
		e.write(zeros[:alignment-r])
	}
}

// kv writes one pair: its key, its type and its value.
func (e *encoder) kv(p kv) {
	e.str(p.key)
	switch v := p.value.(type) {
	case uint32:
		e.u32(typeUint32)
		e.u32(v)
	case int32:
		e.u32(typeInt32)
		e.u32(uint32(v))
	case float32:
		e.u32(typeFloat32)
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(typeBool)
		b := byte(0)
		if v {
			b = 1
		}
		e.write([]byte{b})
	case string:
		e.u32(typeString)
		e.str(v)
	case []string:
		e.u32(typeArray)
		e.u32(typeString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []int32:
		e.u32(typeArray)
		e.u32(typeInt32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	default:
		panic("gguf: unsupported KV value type")
	}
}

// tensorInfo writes one tensor's entry in the tensor table.
func (e *encoder) tensorInfo(name string, ne []int64, typ TensorType, offset int64) {
	e.str(name)
	e.u32(uint32(len(ne)))
	for _, d := range ne {
		e.u64(uint64(d))
	}
	e.u32(uint32(typ))
	e.u64(uint64(offset))
}

func (e *encoder) flush() error {
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

// aligned rounds n up to a multiple of the alignment.
func aligned(n int64) int64 { return (n + alignment - 1) / alignment * alignment }
