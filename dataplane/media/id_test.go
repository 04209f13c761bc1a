package media

import (
	"strconv"
	"testing"

	"github.com/zeebo/xxh3"
)

// Key is the contract's u64 (xxh3-128's low half), which is also the
// last 16 hex digits of the id engines are given: the bridge can derive
// it from the uuid vLLM echoes back.
func TestIDKey(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("x"), testImage(t, PNG, 32, 16, 1), testImage(t, PNG, 32, 16, 2)} {
		id := IDOf(b)
		if got, want := id.Key(), xxh3.Hash128(b).Lo; got != want {
			t.Fatalf("Key() = %#x, want xxh3-128 Lo %#x", got, want)
		}
		s := id.String()
		if lo, err := strconv.ParseUint(s[16:], 16, 64); err != nil || lo != id.Key() {
			t.Fatalf("String() %s ends in %#x (%v), Key() is %#x", s, lo, err, id.Key())
		}
	}
	if IDOf([]byte("a")).Key() == IDOf([]byte("b")).Key() {
		t.Fatal("two contents share a key")
	}
}
