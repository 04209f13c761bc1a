package tokenize

import (
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPieceCacheEntries: a cached piece gives back its ids, a piece that
// only shares a slot's hash bits or a prefix does not, and pieces too long
// or of too many ids are not kept (they are merged again).
func TestPieceCacheEntries(t *testing.T) {
	var c pieceCache
	c.put("hello", []uint32{1, 2})
	if ids, ok := c.get("hello"); !ok || !slices.Equal(ids, []uint32{1, 2}) {
		t.Fatalf("get(hello) = %v, %v", ids, ok)
	}
	for _, miss := range []string{"hell", "hello!", "", "world"} {
		if ids, ok := c.get(miss); ok {
			t.Errorf("get(%q) = %v, want a miss", miss, ids)
		}
	}
	many := make([]uint32, pieceCacheIDs+1)
	c.put("rare", many)
	if _, ok := c.get("rare"); ok {
		t.Error("a piece of more than pieceCacheIDs ids was kept")
	}
	long := strings.Repeat("x", pieceCacheMax+1)
	c.put(long, []uint32{7})
	if _, ok := c.get(long); ok {
		t.Error("a piece longer than pieceCacheMax was kept")
	}
}

// TestPieceEntryHasNoPointers holds the cache's entries pointer-free, so
// the GC does not scan the up to 128 Ki entries of a full cache.
func TestPieceEntryHasNoPointers(t *testing.T) {
	ty := reflect.TypeFor[pieceEntry]()
	for i := range ty.NumField() {
		switch f := ty.Field(i); f.Type.Kind() {
		case reflect.Uint8, reflect.Uint32:
		case reflect.Array:
			if k := f.Type.Elem().Kind(); k != reflect.Uint8 && k != reflect.Uint32 {
				t.Errorf("field %s is an array of %v", f.Name, k)
			}
		default:
			t.Errorf("field %s is a %v: entries must hold no pointers", f.Name, f.Type)
		}
	}
}

// BenchmarkPieceCacheGC is a garbage collection with a full piece cache
// live (two entries a set, 128 Ki pieces): what the cache adds to every GC
// cycle of a router whose prompts are varied.
func BenchmarkPieceCacheGC(b *testing.B) {
	c := new(pieceCache)
	var buf []byte
	for i := range 4 * pieceCacheSlots {
		buf = strconv.AppendInt(append(buf[:0], " w"...), int64(i), 36)
		c.put(string(buf), []uint32{uint32(i), uint32(i >> 8)})
	}
	runtime.GC()
	b.ResetTimer()
	cpu := startCPU()
	for b.Loop() {
		runtime.GC()
	}
	cpu.report(b)
	runtime.KeepAlive(c)
}
