package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestHybridCommand: kvgate-bench hybrid replays a small multi-turn
// workload on both hybrid profiles and prints, per policy, its result and
// the line "prediction exact: P%". How exact is not asserted here: the
// router's prediction races the engines on a loaded machine (the numbers
// are measured and written down, perf/RESULTS.md).
func TestHybridCommand(t *testing.T) {
	var out bytes.Buffer
	err := cmdHybrid(context.Background(), []string{"--workload", "multi-turn:sessions=4,turns=3,system=256,user=64,output=8,think=2,rate=8",
		"--engines", "2", "--speed", "50"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== gptoss-like", "== qwen3next-like", "kv             prediction exact: ", "kv-group-blind prediction exact: "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "error:") || strings.Count(out.String(), "prediction exact:") != 4 {
		t.Fatalf("want 4 runs without errors:\n%s", out.String())
	}
}
