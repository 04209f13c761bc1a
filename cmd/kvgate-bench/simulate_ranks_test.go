package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"
)

// TestSimulateRanks: --ranks gives each engine data-parallel ranks of
// --gpu-blocks each (the pooled ideal counts them all), kv routes them as
// many engines, and kv-rank-blind is the router that matched rank 0 only.
func TestSimulateRanks(t *testing.T) {
	const spec = "shared-prefix:groups=60,prefix=512,suffix=32,n=300,rate=20,output=4,seed=2"
	hits := map[string]float64{}
	for _, shape := range []struct{ engines, ranks, pattern string }{
		{"4", "1", `(?m)^pooled-lru +1024 blocks \(4 engines x 256 GPU \+ 0 CPU \+ 0 disk\): hit [0-9.]+\n` +
			`kv +300 ok +0 err .* hit ([0-9.]+) `},
		{"1", "4", `(?m)^pooled-lru +1024 blocks \(1 engines x 4 ranks x 256 GPU \+ 0 CPU \+ 0 disk\): hit [0-9.]+\n` +
			`kv +300 ok +0 err .* hit ([0-9.]+) .*\nkv-rank-blind +300 ok +0 err .* hit ([0-9.]+) `},
	} {
		var out bytes.Buffer
		if rc := run([]string{"simulate", "--workload", spec, "--engines", shape.engines, "--ranks", shape.ranks, "--routers", "1",
			"--gpu-blocks", "256", "--policies", "kv,kv-rank-blind"}, &out, io.Discard); rc != 0 {
			t.Fatalf("simulate: exit %d\n%s", rc, out.String())
		}
		m := regexp.MustCompile(shape.pattern).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("simulate printed:\n%s", out.String())
		}
		hits[shape.engines+"x"+shape.ranks], _ = strconv.ParseFloat(m[1], 64)
		if len(m) > 2 {
			hits["blind"], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if hits["1x4"] != hits["4x1"] || hits["blind"] >= hits["1x4"] {
		t.Fatalf("hit rates %v: want 1x4 routed by rank = 4x1, rank-blind below", hits)
	}
	if rc := run([]string{"simulate", "--workload", spec, "--ranks", "0"}, io.Discard, io.Discard); rc == 0 {
		t.Fatal("--ranks 0 accepted")
	}
}
