package streambench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
)

// fetchProfile saves a CPU profile of secs seconds from a kvgate's admin
// listener (net/http/pprof) to path.
func fetchProfile(ctx context.Context, admin string, secs int, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("fetching CPU profile: status %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("saving CPU profile: %w", err)
	}
	return f.Close()
}

// WriteTable writes one line per result, and for every binary after the
// first its ratios to the first at the same stream count: tokens/s (higher
// is better), CPU per million tokens and CPU per SSE event (first's over
// this one's: higher is better too).
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "| kvgate | streams | tokens | wall s | tokens/s | kvgate CPU s | CPU s per 1M tokens | tokens per SSE event | CPU us per SSE event |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.0f | %.2f | %.2f | %.2f | %.1f |\n", r.Label, r.Streams, r.Tokens,
			r.Wall.Seconds(), r.TokensPerSecond(), r.CPU, r.CPUPerMillion(), float64(r.Tokens)/float64(max(r.Events, 1)), r.CPUPerEvent())
	}
	first := map[int]Result{}
	var ratios []string
	for _, r := range rs {
		f, ok := first[r.Streams]
		if !ok {
			first[r.Streams] = r
			continue
		}
		ratios = append(ratios, fmt.Sprintf("- %d streams, %s vs %s: tokens/s x%.2f, CPU per million tokens x%.2f lower, CPU per SSE event x%.2f lower",
			r.Streams, r.Label, f.Label, r.TokensPerSecond()/f.TokensPerSecond(), f.CPUPerMillion()/r.CPUPerMillion(), f.CPUPerEvent()/r.CPUPerEvent()))
	}
	if len(ratios) > 0 {
		fmt.Fprintln(w)
		for _, l := range ratios {
			fmt.Fprintln(w, l)
		}
	}
}
