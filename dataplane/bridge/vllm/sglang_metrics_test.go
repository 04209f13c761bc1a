package vllm

import (
	"bytes"
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// TestLoadsSGLangPages: SGLang states its KV pool in tokens; LOAD sizes
// the GPU tier in pages of the bridge's block size (SGLang's --page-size),
// per DP rank, and vLLM's num_gpu_blocks, or the bridge's capacity, when
// the engine says blocks or nothing.
func TestLoadsSGLangPages(t *testing.T) {
	m, err := parseMetrics(bytes.NewReader(readExposition(t, "sglang-dp2-tp4.txt")))
	if err != nil {
		t.Fatal(err)
	}
	loads := Loads(m, 2, 999, 16)
	for r, want := range []wire.TierUsage{{Tier: wire.TierGPU, Used: 2560, Total: 5120}, {Tier: wire.TierGPU, Used: 1280, Total: 5120}} {
		if got := loads[r].Tiers; len(got) != 1 || got[0] != want {
			t.Errorf("rank %d: %+v, want %+v", r, got, want)
		}
	}
	if l := Loads(map[int]*EngineMetrics{0: {GPUBlocks: 300, GPUTokens: 64000}}, 1, 999, 16)[0]; l.Tiers[0].Total != 300 {
		t.Errorf("num_gpu_blocks and a token pool: %d blocks", l.Tiers[0].Total)
	}
	if l := Loads(map[int]*EngineMetrics{0: {}}, 1, 999, 16)[0]; l.Tiers[0].Total != 999 {
		t.Errorf("no size from the engine: %d blocks", l.Tiers[0].Total)
	}
}
