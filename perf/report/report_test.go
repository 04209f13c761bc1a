package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/perf/loadgen"
)

func TestWriteDir(t *testing.T) {
	res := func(hit float64) *loadgen.Result {
		return &loadgen.Result{Requests: 10, PrefixHitRate: hit,
			TTFT:    loadgen.Summary{P50: 10, P99: 50, CDF: [][2]float64{{5, 0}, {10, 0.5}, {50, 0.99}, {60, 1}}},
			Engines: map[string]loadgen.EngineWork{"a": {UncachedTokens: 100}, "b": {UncachedTokens: 300}},
			Load:    []loadgen.LoadPoint{{Seconds: 0, Max: 3, Mean: 2}, {Seconds: 1, Max: 2, Mean: 2}}}
	}
	c := &Comparison{Workload: "w", Flags: map[string]any{"engines": 2},
		Policies: map[string]*loadgen.Result{"kv": res(0.5), "round-robin": res(0.1)}, Order: []string{"kv", "round-robin"}}
	dir := t.TempDir()
	if err := c.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || !strings.Contains(string(md), "| kv | 10 |") || !strings.Contains(string(md), "| round-robin |") {
		t.Fatalf("%v\n%s", err, md)
	}
	for _, f := range []string{"ttft_cdf.svg", "hit_rate.svg", "engine_work.svg", "load_over_time.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("%s: %v", f, err)
		}
	}
	path := filepath.Join(dir, "r.json")
	if err := c.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var back Comparison
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &back); err != nil || back.Policies["kv"].PrefixHitRate != 0.5 {
		t.Fatalf("json: %v", err)
	}
}
