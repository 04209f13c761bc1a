package workload

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzLimits keep each input's workload small enough to build thousands of
// times; what is over them is refused like a real SPEC over defaultLimits.
var fuzzLimits = limits{tokens: 1 << 18, requests: 1 << 12}

// realSpecs are the SPECs the repository runs: README.md, kvgate-bench's
// help, perf/scripts/herd.sh (its defaults), perf/cluster's test and this
// package's tests, and the traces in testdata.
var realSpecs = []string{
	"shared-prefix:groups=8,prefix=4096,n=500,rate=10",
	"shared-prefix:groups=8,prefix=4096,suffix=256,n=1000,rate=4",
	"multi-turn:sessions=64,turns=8,system=2048,user=256,output=128,think=2,rate=4",
	"agentic:agents=32,steps=8,system=2048,result=1024,output=64,think=1,rate=2",
	"burst:bursts=5,prefix=2048,suffix=1024,n=64,warm=1,gap=3",
	"burst:bursts=1,prefix=2048,suffix=1024,n=16,spread=0,warm=1,seed=1",
	"shared-prefix:groups=40,prefix=1024,suffix=64,n=800,rate=30,output=8,seed=3",
	"shared-prefix:groups=3,prefix=100,suffix=10,n=30,rate=10,seed=5",
	"multi-turn:sessions=4,turns=5,system=50,user=10,output=8,think=1,rate=2,seed=5",
	"agentic:agents=3,steps=4,system=40,result=20,output=5,think=0.5,rate=1,seed=5",
	"burst:bursts=2,prefix=64,suffix=16,n=8,warm=1,gap=2,seed=5",
	"multi-turn:sessions=1,turns=3,system=50,user=10,output=8,think=1,rate=2",
	"multi-lora:adapters=64,zipf=1,prefix=2048,suffix=256,n=6000,rate=40,output=64",
	"multi-lora:adapters=5,zipf=1.2,prefix=40,suffix=8,n=50,rate=10,seed=3",
	"shared-prefix",
	"shared-prefix:groups",
	"nonsense:1",
	"mooncake:testdata/mooncake_head40.jsonl",
	"azure:testdata/azure_conv_head20.csv",
}

// FuzzParse parses SPECs; for mooncake: and azure: the trace is the
// fuzzer's bytes (written to a file of its own, whatever path the SPEC
// names). Every input gives a workload or an error, never a panic or an
// allocation past the limits. A workload is the same when parsed again,
// in arrival order, within the limits, with non-empty prompts of tokens in
// the vocabulary and outputs of at least one token; a generated one
// arrives from time 0 on and has exactly the requests and prompt tokens
// its parameters say. Seeds are the SPECs the repository uses, the traces
// with the heads of the real Mooncake and Azure traces in testdata (the
// Mooncake one cut to its first six requests).
func FuzzParse(f *testing.F) {
	traces := map[string][]byte{}
	for _, kind := range []string{"mooncake", "azure"} {
		for _, s := range realSpecs {
			if k, path, _ := strings.Cut(s, ":"); k == kind {
				b, err := os.ReadFile(path)
				if err != nil {
					f.Fatal(err)
				}
				if kind == "mooncake" { // its first lines: 40 hold 510 k tokens, slow to build again and again
					lines := strings.SplitAfter(string(b), "\n")
					b = []byte(strings.Join(lines[:6], ""))
				}
				traces[kind] = b
			}
		}
	}
	for _, s := range realSpecs {
		kind, _, _ := strings.Cut(s, ":")
		f.Add(s, traces[kind])
	}
	trace := filepath.Join(f.TempDir(), "trace")
	f.Fuzz(func(t *testing.T, spec string, file []byte) {
		kind, args, _ := strings.Cut(spec, ":")
		if kind == "mooncake" || kind == "azure" {
			if err := os.WriteFile(trace, file, 0o600); err != nil {
				t.Fatal(err)
			}
			spec = kind + ":" + trace
		}
		w, err := parse(spec, fuzzLimits)
		if err != nil {
			if w != nil {
				t.Fatal("a workload and an error")
			}
			return
		}
		if again, err := parse(spec, fuzzLimits); err != nil || !reflect.DeepEqual(again, w) {
			t.Fatalf("parsed again: %v, or a different workload", err)
		}
		if w.Spec != spec || !slices.IsSortedFunc(w.Requests, func(a, b Request) int { return cmp.Compare(a.At, b.At) }) {
			t.Fatalf("spec %q, or requests out of arrival order", w.Spec)
		}
		tokens := 0
		for i, r := range w.Requests {
			tokens += len(r.Prompt)
			if len(r.Prompt) == 0 || r.Output < 1 || slices.ContainsFunc(r.Prompt, func(id uint32) bool { return id >= vocab }) {
				t.Fatalf("request %d: %d prompt tokens, output %d", i, len(r.Prompt), r.Output)
			}
		}
		if tokens > fuzzLimits.tokens || len(w.Requests) > fuzzLimits.requests {
			t.Fatalf("%d tokens in %d requests, over the limits", tokens, len(w.Requests))
		}
		if kind == "mooncake" || kind == "azure" {
			return
		}
		p, err := parseParams(args)
		if err != nil {
			t.Fatal(err)
		}
		_, held := p.promptSize(kind)
		requests, _ := p.requestCount(kind)
		if float64(tokens) != held || float64(len(w.Requests)) != requests {
			t.Fatalf("%d requests of %d tokens; the parameters say %v of %v", len(w.Requests), tokens, requests, held)
		}
		if len(w.Requests) > 0 && w.Requests[0].At < 0 {
			t.Fatalf("first arrival at %v", w.Requests[0].At)
		}
	})
}

// TestParseRefuses: SPECs that used to panic, convert floats to integers
// in the platform's own way or exhaust memory are refused, each with its
// error.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		spec string
		want error
	}{
		{"shared-prefix:groups=0", ErrBadParameter}, // rand.IntN(0) panicked
		{"shared-prefix:prefix=-1", ErrBadParameter},
		{"multi-turn:output=-5", ErrBadParameter},
		{"burst:n=NaN", ErrBadParameter},
		{"shared-prefix:seed=-1", ErrBadParameter},
		{"agentic:rate=0", ErrBadParameter},
		{"shared-prefix:prefix=0,suffix=0", ErrBadParameter},
		{"shared-prefix:n=1e9", ErrTooLarge},
		{"multi-turn:sessions=1e6,turns=1e3", ErrTooLarge},
		{"burst:warm=1e300", ErrTooLarge},
		{"shared-prefix:n=10,rate=1e-300", ErrTooLarge},
	} {
		if _, err := Parse(c.spec); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.spec, err, c.want)
		}
	}
	// The real SPECs still parse, and the README's the same as before.
	for _, s := range realSpecs[:12] {
		if _, err := Parse(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	w, _ := Parse("burst:bursts=1,prefix=4,suffix=4,n=4,spread=2,warm=1")
	if got := w.Requests[len(w.Requests)-1].At; got != time.Second+1500*time.Millisecond {
		t.Fatalf("last of a spread burst at %v", got)
	}
}
