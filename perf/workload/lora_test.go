package workload

import (
	"slices"
	"testing"
)

// TestMultiLoRA checks that adapters are Zipf-popular (adapter 1 the most,
// about 1/H(64) of requests at exponent 1) and that each adapter's
// requests share its own prefix and no other's.
func TestMultiLoRA(t *testing.T) {
	w, err := Parse("multi-lora:adapters=64,zipf=1,prefix=32,suffix=8,n=4000,rate=100,seed=2")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint32]int{}
	prefixes := map[uint32][]uint32{}
	for _, r := range w.Requests {
		if r.LoRA < 1 || r.LoRA > 64 || len(r.Prompt) != 40 {
			t.Fatalf("request %+v", r)
		}
		counts[r.LoRA]++
		if p, ok := prefixes[r.LoRA]; !ok {
			prefixes[r.LoRA] = r.Prompt[:32]
		} else if !slices.Equal(p, r.Prompt[:32]) {
			t.Fatalf("adapter %d: two prefixes", r.LoRA)
		}
	}
	if got := float64(counts[1]) / 4000; got < 0.17 || got > 0.25 { // 1/H(64) = 0.21
		t.Fatalf("adapter 1 has %.3f of requests, want ~0.21", got)
	}
	if counts[1] <= counts[8] || counts[8] <= counts[64] {
		t.Fatalf("not Zipf: %d %d %d", counts[1], counts[8], counts[64])
	}
	if slices.Equal(prefixes[1], prefixes[2]) {
		t.Fatal("adapters share a prefix")
	}
	if _, err := Parse("multi-lora:zipf=-1"); err == nil {
		t.Fatal("negative exponent accepted")
	}
}
