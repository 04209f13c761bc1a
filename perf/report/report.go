// Package report writes a comparison of benchmark runs: the JSON of every
// result, a Markdown summary and SVG plots (gonum/plot).
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/kvgate/kvgate/perf/loadgen"
)

// Comparison is the results of one workload under several policies.
type Comparison struct {
	Workload string                     `json:"workload"`
	Flags    map[string]any             `json:"flags"`
	Policies map[string]*loadgen.Result `json:"policies"`
	Order    []string                   `json:"order"`
}

// WriteJSON writes the comparison to path.
func (c *Comparison) WriteJSON(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteDir writes README.md and the plots into dir.
func (c *Comparison) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Policy comparison\n\nWorkload: `%s`\n\nFlags: `%v`\n\n", c.Workload, c.Flags)
	md.WriteString("| policy | requests | errors | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | e2e p50 ms | e2e p99 ms | req/s | out tok/s | prefix hit rate | imbalance |\n")
	md.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range c.Order {
		r := c.Policies[p]
		fmt.Fprintf(&md, "| %s | %d | %d | %.0f | %.0f | %.1f | %.0f | %.0f | %.2f | %.0f | %.3f | %.2f |\n",
			p, r.Requests, r.Errors, r.TTFT.P50, r.TTFT.P99, r.ITL.P50, r.E2E.P50, r.E2E.P99,
			r.RequestsPerS, r.OutputTokensPerS, r.PrefixHitRate, r.Imbalance)
	}
	md.WriteString("\n![TTFT CDF](ttft_cdf.svg)\n\n![prefix hit rate](hit_rate.svg)\n\n![per-engine work](engine_work.svg)\n\n![load over time](load_over_time.svg)\n\n")
	md.WriteString("Prefix hit rate: prompt tokens the engines reported served from cache, over all prompt tokens. ")
	md.WriteString("Imbalance: the most loaded engine's uncached prompt tokens over the mean of all engines.\n")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	if err := c.plotCDF(filepath.Join(dir, "ttft_cdf.svg")); err != nil {
		return err
	}
	if err := c.plotHitRate(filepath.Join(dir, "hit_rate.svg")); err != nil {
		return err
	}
	if err := c.plotEngineWork(filepath.Join(dir, "engine_work.svg")); err != nil {
		return err
	}
	return c.plotLoad(filepath.Join(dir, "load_over_time.svg"))
}

// plotLoad draws, per policy, the busiest engine's prefill work in each
// slice of the run over the mean engine's: 1 is perfect balance.
func (c *Comparison) plotLoad(path string) error {
	p := plot.New()
	p.Title.Text = "Per-engine load over time (busiest / mean uncached prompt tokens sent)"
	p.X.Label.Text = "s"
	var args []any
	for _, name := range c.Order {
		var pts plotter.XYs
		for _, l := range c.Policies[name].Load {
			if l.Mean > 0 {
				pts = append(pts, plotter.XY{X: l.Seconds, Y: l.Max / l.Mean})
			}
		}
		if len(pts) > 0 {
			args = append(args, name, pts)
		}
	}
	if len(args) == 0 {
		return nil
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

func (c *Comparison) plotCDF(path string) error {
	p := plot.New()
	p.Title.Text = "Time to first token"
	p.X.Label.Text = "ms (log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{}
	var args []any
	for _, name := range c.Order {
		var pts plotter.XYs
		for _, xy := range c.Policies[name].TTFT.CDF {
			pts = append(pts, plotter.XY{X: max(xy[0], 0.1), Y: xy[1]})
		}
		args = append(args, name, pts)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

func (c *Comparison) plotHitRate(path string) error {
	p := plot.New()
	p.Title.Text = "Prefix hit rate (engine-reported)"
	vals := make(plotter.Values, len(c.Order))
	for i, name := range c.Order {
		vals[i] = c.Policies[name].PrefixHitRate
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return err
	}
	p.Add(bars)
	p.NominalX(c.Order...)
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

// plotEngineWork draws each policy's uncached prompt tokens per engine,
// engines sorted by work, so imbalance shows as a slope.
func (c *Comparison) plotEngineWork(path string) error {
	p := plot.New()
	p.Title.Text = "Prefill work per engine (uncached prompt tokens, sorted)"
	p.X.Label.Text = "engine rank"
	var args []any
	for _, name := range c.Order {
		var works []float64
		for _, w := range c.Policies[name].Engines {
			works = append(works, float64(w.UncachedTokens))
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(works)))
		pts := make(plotter.XYs, len(works))
		for i, w := range works {
			pts[i] = plotter.XY{X: float64(i), Y: w}
		}
		args = append(args, name, pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
