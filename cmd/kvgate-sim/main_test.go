package main

import (
	"io"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/sim"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (the
// simulator's server and signal handling, once a test runs them).
// Nothing is ignored: the command uses no library that keeps goroutines
// for the life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseFlags(t *testing.T) {
	cfg, listen, _, err := parseFlags([]string{"--listen", "127.0.0.1:0", "--id", "e7", "--gpu-blocks", "100",
		"--cpu-blocks", "50", "--disk-blocks", "200", "--disk-bandwidth", "14", "--disk-latency", "50us", "--dp-ranks", "2", "--lora", "1=sql,2=chat", "--profile", "zero", "--hash-seed", "0x10", "--speed", "60"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if listen != "127.0.0.1:0" || cfg.ID != "e7" || cfg.Rank.GPUBlocks != 100 || cfg.Rank.CPUBlocks != 50 ||
		cfg.Rank.DiskBlocks != 200 || cfg.Rank.DiskLink != (sim.TierLink{GBps: 14, Latency: 50 * time.Microsecond}) || cfg.Rank.CPULink != sim.DefaultCPULink ||
		cfg.DPRanks != 2 || len(cfg.LoRAs) != 2 || cfg.LoRAs[1].Name != "chat" || cfg.Rank.Profile.Name != "zero" ||
		cfg.Rank.HashSeed != 16 || cfg.Speed != 60 {
		t.Fatalf("%+v", cfg)
	}
	for _, bad := range [][]string{{"--lora", "x"}, {"--gpu-blocks", "0"}, {"--speed", "0"}, {"--profile", "/nonexistent"}, {"--hash-seed", "zz"}, {"--disk-blocks", "-1"}, {"--cpu-bandwidth", "0"}} {
		if _, _, _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
