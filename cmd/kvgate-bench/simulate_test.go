package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"
)

// TestSimulateTiers: simulate takes the tier sizes, prints the pooled LRU
// ideal of their total first, then a line per policy, kv-tier-blind
// included; ideal prints the same number for the same size.
func TestSimulateTiers(t *testing.T) {
	const spec = "shared-prefix:groups=40,prefix=512,suffix=32,n=200,rate=20,output=4,seed=2"
	var out bytes.Buffer
	if rc := run([]string{"simulate", "--workload", spec, "--engines", "2", "--routers", "1", "--gpu-blocks", "64",
		"--cpu-blocks", "128", "--disk-blocks", "256", "--disk-bandwidth", "14", "--policies", "kv,kv-tier-blind"}, &out, io.Discard); rc != 0 {
		t.Fatalf("simulate: exit %d\n%s", rc, out.String())
	}
	m := regexp.MustCompile(`(?m)^pooled-lru +896 blocks \(2 engines x 64 GPU \+ 128 CPU \+ 256 disk\): hit ([0-9.]+)\n` +
		`kv +200 ok +0 err .*\nkv-tier-blind +200 ok +0 err `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("simulate printed:\n%s", out.String())
	}
	var ideal bytes.Buffer
	if rc := run([]string{"ideal", "--workload", spec, "--blocks", "896,0"}, &ideal, io.Discard); rc != 0 {
		t.Fatalf("ideal: exit %d", rc)
	}
	want := "pooled-lru       896 blocks (14336 tokens): hit " + m[1] + "\npooled-lru         0 blocks (0 tokens): hit 0.000\n"
	if ideal.String() != want {
		t.Fatalf("ideal printed %q, want %q", ideal.String(), want)
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
		t.Fatalf("pooled ideal %v", v)
	}
	if rc := run([]string{"simulate", "--workload", spec, "--disk-bandwidth", "0", "--disk-blocks", "8"}, io.Discard, io.Discard); rc == 0 {
		t.Fatal("a disk link of 0 GB/s accepted")
	}
}
