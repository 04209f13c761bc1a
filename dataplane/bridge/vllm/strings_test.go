package vllm

import "testing"

// TestEventKindString: kinds print as their msgspec tags, the names vLLM
// sends, and undefined values as numbers.
func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{BlockStored: "BlockStored", BlockRemoved: "BlockRemoved",
		AllBlocksCleared: "AllBlocksCleared", 0: "EventKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d) is %q, want %q", uint8(k), got, want)
		}
	}
}
