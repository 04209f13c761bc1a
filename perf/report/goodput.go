package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// GoodputSweep is goodput over offered load for several fleets or
// policies (kvgate-bench goodput): for each series (say "8 aggregated" or
// "2:6 conditional") one run per load.
type GoodputSweep struct {
	Workload string         `json:"workload"`
	Flags    map[string]any `json:"flags"`
	// TTFT and TPOT are the targets a request must meet together to count.
	TTFT string       `json:"ttft_target"`
	TPOT string       `json:"tpot_target"`
	Runs []GoodputRun `json:"runs"`
	// Against names, for a series, the one its goodput is a ratio to in
	// the table (say a rule's against the same split without it).
	Against map[string]string `json:"against,omitempty"`
}

// GoodputRun is one series at one load.
type GoodputRun struct {
	Series string  `json:"series"`
	Load   float64 `json:"load"`
	// Goodput is requests/s within both targets; Throughput, requests/s.
	Goodput    float64 `json:"goodput"`
	Throughput float64 `json:"throughput"`
	// Requests completed; Met within both targets, TTFTMet and TPOTMet
	// within each; Split served disaggregated.
	Requests int `json:"requests"`
	Met      int `json:"met"`
	TTFTMet  int `json:"ttft_met"`
	TPOTMet  int `json:"tpot_met"`
	Split    int `json:"split"`
	// TTFTP50 and TTFTP99 (ms), ITLP50 (ms) and the prefix hit rate.
	TTFTP50 float64 `json:"ttft_p50_ms"`
	TTFTP99 float64 `json:"ttft_p99_ms"`
	ITLP50  float64 `json:"itl_p50_ms"`
	Hit     float64 `json:"hit"`
}

// Series returns the series' names in the order their first run came.
func (s *GoodputSweep) Series() []string {
	return firstSeen(s.Runs, func(r GoodputRun) string { return r.Series })
}

// Loads returns the loads run, in the order they first came.
func (s *GoodputSweep) Loads() []float64 {
	return firstSeen(s.Runs, func(r GoodputRun) float64 { return r.Load })
}

// firstSeen is the distinct values of key over runs, in the order they
// first come.
func firstSeen[T comparable](runs []GoodputRun, key func(GoodputRun) T) []T {
	var out []T
	for _, r := range runs {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// WriteDir writes goodput.json, README.md (the table) and goodput.svg
// (goodput over load, a line per series) into dir.
func (s *GoodputSweep) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "goodput.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(s.markdown()), 0o644); err != nil {
		return err
	}
	return s.PlotSVG(filepath.Join(dir, "goodput.svg"))
}

// markdown is the README: every run (with its ratio to the series it is
// against), then per load the first series against the best other.
func (s *GoodputSweep) markdown() string {
	var md strings.Builder
	fmt.Fprintf(&md, "# Goodput over load\n\nWorkload: `%s`\n\nFlags: `%v`\n\n", s.Workload, s.Flags)
	fmt.Fprintf(&md, "Goodput: requests/s meeting **TTFT <= %s and TPOT <= %s** together.\n\n![goodput over load](goodput.svg)\n\n", s.TTFT, s.TPOT)
	md.WriteString("| load | series | goodput req/s | ratio | throughput req/s | TTFT ok | TPOT ok | both | split | TTFT p50 / p99 ms | ITL p50 ms | hit |\n")
	md.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Runs {
		vs := ""
		if base := s.run(s.Against[r.Series], r.Load); base != nil {
			vs = ratio(r.Goodput, base.Goodput) + " of " + base.Series
		}
		fmt.Fprintf(&md, "| x%g | %s | %.3f | %s | %.3f | %d | %d | %d/%d | %d | %.0f / %.0f | %.1f | %.3f |\n", r.Load, r.Series, r.Goodput,
			vs, r.Throughput, r.TTFTMet, r.TPOTMet, r.Met, r.Requests, r.Split, r.TTFTP50, r.TTFTP99, r.ITLP50, r.Hit)
	}
	names := s.Series()
	if len(names) < 2 {
		return md.String()
	}
	fmt.Fprintf(&md, "\nPer load, %s against the best other series (goodput):\n\n", names[0])
	for _, l := range s.Loads() {
		first, best := s.run(names[0], l), (*GoodputRun)(nil)
		for _, name := range names[1:] {
			if r := s.run(name, l); r != nil && (best == nil || r.Goodput > best.Goodput) {
				best = r
			}
		}
		if first == nil || best == nil {
			continue
		}
		fmt.Fprintf(&md, "- x%g: %s %.3f req/s, best other %s %.3f (%s)\n", l, first.Series, first.Goodput, best.Series, best.Goodput,
			ratio(best.Goodput, first.Goodput))
	}
	return md.String()
}

// run is series name's run at load, nil if there is none.
func (s *GoodputSweep) run(name string, load float64) *GoodputRun {
	for i := range s.Runs {
		if s.Runs[i].Series == name && s.Runs[i].Load == load {
			return &s.Runs[i]
		}
	}
	return nil
}

// ratio is a over b as "1.23x", or "-" where b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fx", a/b)
}

// PlotSVG draws goodput over load, one line (with points) per series.
func (s *GoodputSweep) PlotSVG(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Goodput (TTFT <= %s and TPOT <= %s)", s.TTFT, s.TPOT)
	p.X.Label.Text = "offered load (x the trace's rate)"
	p.Y.Label.Text = "requests/s within both targets"
	p.Legend.Top, p.Legend.Left = true, true
	var args []any
	for _, name := range s.Series() {
		var pts plotter.XYs
		for _, r := range s.Runs {
			if r.Series == name {
				pts = append(pts, plotter.XY{X: r.Load, Y: r.Goodput})
			}
		}
		args = append(args, name, pts)
	}
	if len(args) == 0 {
		return fmt.Errorf("report: goodput sweep %q has no runs to plot", s.Workload)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
