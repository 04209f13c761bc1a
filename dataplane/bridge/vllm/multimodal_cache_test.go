package vllm

import (
	"strings"
	"testing"
)

// TestRenderCache: the cache keeps processed images up to its bound, least
// recently used out first; an image larger than the bound is not kept; a
// nil cache keeps nothing.
func TestRenderCache(t *testing.T) {
	data := func(n int) string { return strings.Repeat("x", n) }
	c := NewRenderCache(3 * (1000 + 128))
	ids := [][16]byte{{1}, {2}, {3}, {4}}
	for _, id := range ids[:3] {
		c.put(id, processed{tokens: 5, data: data(1000)})
	}
	if _, ok := c.get(ids[0]); !ok { // now the most recent
		t.Fatal("image 1 not kept")
	}
	c.put(ids[3], processed{tokens: 5, data: data(1000)}) // image 2 leaves
	for i, want := range []bool{true, false, true, true} {
		if _, ok := c.get(ids[i]); ok != want {
			t.Errorf("image %d kept %v, want %v", i+1, ok, want)
		}
	}
	if c.Bytes() != 3*(1000+128) {
		t.Errorf("%d bytes held", c.Bytes())
	}
	c.put([16]byte{9}, processed{tokens: 5, data: data(4000)})
	if _, ok := c.get([16]byte{9}); ok || c.Bytes() != 3*(1000+128) {
		t.Errorf("an image over the bound kept, or others lost for it: %d bytes", c.Bytes())
	}
	c.drop(ids[0])
	if _, ok := c.get(ids[0]); ok || c.Bytes() != 2*(1000+128) {
		t.Errorf("a dropped image kept: %d bytes", c.Bytes())
	}
	var none *RenderCache
	none.drop(ids[0])
	none.put(ids[0], processed{tokens: 5, data: "x"})
	if _, ok := none.get(ids[0]); ok || none.Bytes() != 0 {
		t.Error("a nil cache kept an image")
	}
}
