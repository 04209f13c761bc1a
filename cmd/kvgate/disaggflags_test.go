package main

import (
	"io"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
)

// TestDisaggFlags: the split targets land in the routing weights, the
// transfer timeout beside them; negative values are refused.
func TestDisaggFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--sim-engines", "1", "--split-ttft-target", "2s", "--split-tpot-target", "100ms",
		"--kv-transfer-timeout", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (route.SplitTargets{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}); cfg.weights.SplitTargets != want || cfg.disagg.transferTimeout != 5*time.Second {
		t.Fatalf("targets %+v, transfer timeout %v", cfg.weights.SplitTargets, cfg.disagg.transferTimeout)
	}
	if cfg, err := parseFlags([]string{"--sim-engines", "1"}, io.Discard); err != nil || cfg.weights.SplitTargets != (route.SplitTargets{}) {
		t.Fatalf("defaults: %v %+v", err, cfg)
	}
	for _, bad := range []string{"--split-ttft-target", "--split-tpot-target", "--kv-transfer-timeout"} {
		if _, err := parseFlags([]string{"--sim-engines", "1", bad, "-1s"}, io.Discard); err == nil {
			t.Errorf("%s -1s accepted", bad)
		}
	}
}
