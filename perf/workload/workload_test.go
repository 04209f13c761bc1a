package workload

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMooncake(t *testing.T) {
	wl, err := Parse("mooncake:testdata/mooncake_head40.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open("testdata/mooncake_head40.jsonl")
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	type line struct {
		Timestamp   float64 `json:"timestamp"`
		InputLength int     `json:"input_length"`
		HashIDs     []int64 `json:"hash_ids"`
	}
	var lines []line
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(wl.Requests) != len(lines) {
		t.Fatalf("%d requests, want %d", len(wl.Requests), len(lines))
	}
	// Requests stay in order (timestamps are sorted in the file); equal hash
	// ids give equal 512-token blocks, different ones differ.
	for i, r := range wl.Requests {
		if len(r.Prompt) != lines[i].InputLength || r.At != time.Duration(lines[i].Timestamp*float64(time.Millisecond)) {
			t.Fatalf("request %d: %d tokens at %v", i, len(r.Prompt), r.At)
		}
	}
	block := func(id int64) []uint32 { return blockTokens(nil, id) }
	if !slices.Equal(block(7), block(7)) || slices.Equal(block(7), block(8)) {
		t.Fatal("block expansion is not a function of the hash id")
	}
	for i := range wl.Requests {
		for j := range i {
			a, b := lines[i].HashIDs, lines[j].HashIDs
			if len(a) > 1 && len(b) > 1 && a[0] == b[0] {
				if !slices.Equal(wl.Requests[i].Prompt[:512], wl.Requests[j].Prompt[:512]) {
					t.Fatalf("requests %d and %d share block %d but not its tokens", i, j, a[0])
				}
			}
		}
	}
}

func TestAzure(t *testing.T) {
	wl, err := Parse("azure:testdata/azure_conv_head20.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(wl.Requests) != 20 || wl.Requests[0].At != 0 || len(wl.Requests[0].Prompt) != 374 || wl.Requests[0].Output != 44 {
		t.Fatalf("%d requests, first %+v", len(wl.Requests), wl.Requests[0].Output)
	}
	if wl.Requests[19].At <= wl.Requests[1].At {
		t.Fatal("arrival times not increasing")
	}
}

func TestGenerators(t *testing.T) {
	for _, spec := range []string{
		"shared-prefix:groups=3,prefix=100,suffix=10,n=30,rate=10,seed=5",
		"multi-turn:sessions=4,turns=5,system=50,user=10,output=8,think=1,rate=2,seed=5",
		"agentic:agents=3,steps=4,system=40,result=20,output=5,think=0.5,rate=1,seed=5",
		"burst:bursts=2,prefix=64,suffix=16,n=8,warm=1,gap=2,seed=5",
	} {
		a, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Parse(spec)
		if len(a.Requests) == 0 || len(a.Requests) != len(b.Requests) || !slices.Equal(a.Requests[3].Prompt, b.Requests[3].Prompt) {
			t.Fatalf("%s: not deterministic", spec)
		}
	}
	mt, _ := Parse("multi-turn:sessions=1,turns=3,system=50,user=10,output=8,think=1,rate=2")
	r := mt.Requests
	if len(r) != 3 || !slices.Equal(r[1].Prompt[:len(r[0].Prompt)], r[0].Prompt) || len(r[2].Prompt) != len(r[1].Prompt)+8+10 {
		t.Fatal("a conversation's history must grow by the answer and the next turn")
	}
	bu, _ := Parse("burst:bursts=2,prefix=64,suffix=16,n=8,warm=1,gap=2")
	if r := bu.Requests; len(r) != 18 || r[1].At != time.Second || r[8].At != r[1].At || r[10].At != 4*time.Second ||
		!slices.Equal(r[0].Prompt[:64], r[8].Prompt[:64]) || slices.Equal(r[0].Prompt[:64], r[9].Prompt[:64]) {
		t.Fatal("burst: a warm-up then n at once sharing its prefix, per burst, gap seconds apart")
	}
	if _, err := Parse("nonsense:1"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if _, err := Parse("shared-prefix:groups"); err == nil {
		t.Fatal("bad parameter accepted")
	}
}

func TestDenser(t *testing.T) {
	wl, err := Parse("mooncake:testdata/mooncake_head40.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	orig := make([]time.Duration, len(wl.Requests))
	for i, r := range wl.Requests {
		orig[i] = r.At
	}
	wl.Denser(1)
	wl.Denser(0)
	for i, r := range wl.Requests {
		if r.At != orig[i] {
			t.Fatalf("factor 1 or 0 moved request %d from %v to %v", i, orig[i], r.At)
		}
	}
	wl.Denser(4)
	for i, r := range wl.Requests {
		if want := time.Duration(float64(orig[i]) / 4); r.At != want {
			t.Fatalf("request %d at %v after Denser(4), want %v", i, r.At, want)
		}
	}
}

func TestPrefix(t *testing.T) {
	wl, err := Parse("shared-prefix:groups=2,prefix=32,suffix=8,n=10,rate=5,seed=1")
	if err != nil {
		t.Fatal(err)
	}
	first := wl.Requests[3]
	for _, n := range []int{0, 10, 11} {
		w := *wl
		if w.Prefix(n); len(w.Requests) != 10 || w.Spec != wl.Spec {
			t.Fatalf("Prefix(%d) kept %d of 10 (%s)", n, len(w.Requests), w.Spec)
		}
	}
	if wl.Prefix(4); len(wl.Requests) != 4 || wl.Requests[3].At != first.At || !strings.HasSuffix(wl.Spec, "(first 4 requests)") {
		t.Fatalf("Prefix(4): %d requests, spec %q", len(wl.Requests), wl.Spec)
	}
}
