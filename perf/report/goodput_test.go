package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoodputSweep: WriteDir writes the plot with every series in its
// legend, the table with every run and the best series per load, and
// JSON that reads back; a sweep without runs is an error, not an empty plot.
func TestGoodputSweep(t *testing.T) {
	s := &GoodputSweep{Workload: "w", Flags: map[string]any{"engines": 8}, TTFT: "2s", TPOT: "100ms",
		Against: map[string]string{"2:6 conditional, TPOT rule": "2:6 conditional"}}
	for _, load := range []float64{1, 2} {
		for i, name := range []string{"8 aggregated", "2:6 conditional", "2:6 conditional, TPOT rule", "4:4 always"} {
			s.Runs = append(s.Runs, GoodputRun{Series: name, Load: load, Goodput: load * float64(4-i), Throughput: load * 4, Requests: 100, Met: 90 - i})
		}
	}
	dir := t.TempDir()
	if err := s.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "goodput.svg"))
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("goodput.svg: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range s.Series() {
		if !strings.Contains(string(svg), ">"+name+"<") {
			t.Errorf("the plot's legend has no series %q", name)
		}
		for _, load := range []string{"| x1 | ", "| x2 | "} {
			if !strings.Contains(string(md), load+name+" |") {
				t.Errorf("the table has no row %q%s", load, name)
			}
		}
	}
	if !strings.Contains(string(md), "- x2: 8 aggregated 8.000 req/s, best other 2:6 conditional 6.000 (0.750x)") ||
		!strings.Contains(string(md), "| x2 | 2:6 conditional, TPOT rule | 4.000 | 0.667x of 2:6 conditional |") {
		t.Errorf("best per load missing:\n%s", md)
	}
	var back GoodputSweep
	b, _ := os.ReadFile(filepath.Join(dir, "goodput.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != len(s.Runs) || back.Runs[5] != s.Runs[5] {
		t.Fatalf("json: %v %+v", err, back.Runs)
	}
	if err := (&GoodputSweep{Workload: "empty"}).PlotSVG(filepath.Join(dir, "empty.svg")); err == nil {
		t.Error("a sweep without runs plotted")
	}
}
