package main

import (
	"io"
	"testing"
)

// TestSimProfileHybrid: --sim-profile names a hybrid model's profile, as
// kvgate --sim-engines and kvgate-bench do, and brings its KV cache groups.
func TestSimProfileHybrid(t *testing.T) {
	for name, groups := range map[string]int{"gptoss-like": 2, "qwen3next-like": 4} {
		cfg, _, _, err := parseFlags([]string{"--sim-profile", name}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Rank.Profile.Name != name || len(cfg.Rank.Profile.Groups) != groups || len(cfg.Rank.Groups()) != groups {
			t.Fatalf("--sim-profile %s: profile %q with %d groups, want %d", name, cfg.Rank.Profile.Name, len(cfg.Rank.Profile.Groups), groups)
		}
	}
}
