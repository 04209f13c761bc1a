package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"
)

// TestSimulateLoRA: --max-loras models adapter slots and prints each
// policy's adapter line; kv that knows residency loads fewer adapters than
// kv-lora-blind.
func TestSimulateLoRA(t *testing.T) {
	var out bytes.Buffer
	if rc := run([]string{"simulate", "--workload", "multi-lora:adapters=16,zipf=1,prefix=256,suffix=32,n=600,rate=60,output=4,seed=2",
		"--engines", "4", "--routers", "1", "--gpu-blocks", "512", "--max-loras", "2", "--lora-load-time", "50ms",
		"--policies", "kv,kv-lora-blind,lora-affinity"}, &out, io.Discard); rc != 0 {
		t.Fatalf("simulate: exit %d\n%s", rc, out.String())
	}
	loads := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+) +adapters: 600 requests, hit [0-9.]+, (\d+) loads \([0-9.]+/min\), \d+ evictions$`).
		FindAllStringSubmatch(out.String(), -1) {
		loads[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(loads) != 3 || loads["kv"] >= loads["kv-lora-blind"] {
		t.Fatalf("adapter loads %v; simulate printed:\n%s", loads, out.String())
	}
}
