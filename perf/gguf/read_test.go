package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// file is a GGUF file as the tests read it back: an independent reader of
// the layout drawn in doc.go, so a writer bug is not mirrored by a reader
// sharing its code.
type file struct {
	version uint32
	kvs     map[string]any
	order   []string
	tensors []tensorEntry
	dataAt  int64 // where the data section starts
	size    int64
}

type tensorEntry struct {
	name   string
	ne     []int64
	typ    TensorType
	offset int64
}

type reader struct {
	b   []byte
	pos int64
	err error
}

var errShort = errors.New("short file")

func (r *reader) take(n int64) []byte {
	if r.err != nil || n < 0 || r.pos+n > int64(len(r.b)) {
		r.err = errShort
		return make([]byte, max(n, 0))
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) str() string {
	n := r.u64()
	if n > 1<<30 {
		r.err = errShort
		return ""
	}
	return string(r.take(int64(n)))
}

func (r *reader) value(typ uint32) any {
	switch typ {
	case typeUint32:
		return r.u32()
	case typeInt32:
		return int32(r.u32())
	case typeFloat32:
		return math.Float32frombits(r.u32())
	case typeBool:
		return r.take(1)[0] != 0
	case typeString:
		return r.str()
	case typeArray:
		elem, n := r.u32(), r.u64()
		switch elem {
		case typeString:
			out := make([]string, 0, min(n, 1<<20))
			for range n {
				out = append(out, r.str())
			}
			return out
		case typeInt32:
			out := make([]int32, 0, min(n, 1<<20))
			for range n {
				out = append(out, int32(r.u32()))
			}
			return out
		}
	}
	r.err = fmt.Errorf("unexpected type %d", typ)
	return nil
}

func parse(b []byte) (*file, error) {
	r := &reader{b: b}
	if string(r.take(4)) != magic {
		return nil, errors.New("bad magic")
	}
	f := &file{version: r.u32(), kvs: map[string]any{}, size: int64(len(b))}
	nt, nkv := r.u64(), r.u64()
	for range nkv {
		k := r.str()
		if _, dup := f.kvs[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		f.kvs[k] = r.value(r.u32())
		f.order = append(f.order, k)
	}
	for range nt {
		t := tensorEntry{name: r.str()}
		nd := r.u32()
		for range nd {
			t.ne = append(t.ne, int64(r.u64()))
		}
		t.typ = TensorType(r.u32())
		t.offset = int64(r.u64())
		f.tensors = append(f.tensors, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	f.dataAt = aligned(r.pos)
	if r.pos == int64(len(b)) && nt > 0 {
		return nil, io.ErrUnexpectedEOF
	}
	return f, nil
}

// data returns tensor t's bytes.
func (f *file) data(b []byte, t tensorEntry) []byte {
	n := t.typ.size()
	for _, d := range t.ne {
		n *= d
	}
	return b[f.dataAt+t.offset : f.dataAt+t.offset+n]
}
