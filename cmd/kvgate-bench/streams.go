package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/perf/routers"
	"github.com/kvgate/kvgate/perf/streambench"
)

// cmdStreams measures streamed tokens per second and kvgate's CPU per
// million tokens (perf/streambench), for one kvgate binary or several side
// by side.
func cmdStreams(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := streambench.Defaults()
	var bins, streams, jsonPath string
	fs.StringVar(&bins, "kvgate", "", "kvgate binaries as LABEL=PATH,... measured in alternation round by round, ratios to the first (default: one, next to kvgate-bench, then $PATH)")
	fs.StringVar(&streams, "streams", "256,2048", "concurrent streams to measure, comma-separated")
	fs.IntVar(&o.Engines, "engines", o.Engines, "zero-cost simulated engines")
	fs.IntVar(&o.MaxTokens, "max-tokens", o.MaxTokens, "max_tokens of each stream (all generated: ignore_eos)")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds per measurement; the least CPU per token is kept")
	fs.Float64Var(&o.StepMs, "step-ms", 0, "pace the engines: every decode step takes this many ms (0: zero-cost engines)")
	fs.StringVar(&o.ProfileDir, "profile-dir", "", "write a kvgate CPU profile per binary and stream count here (one more round each)")
	fs.StringVar(&jsonPath, "json", "", "write the results as JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.Binaries, err = parseBinaries(bins); err != nil {
		return err
	}
	if o.Streams, err = parseInts(streams); err != nil {
		return fmt.Errorf("--streams: %w", err)
	}
	o.Log = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	rs, err := streambench.Run(ctx, o)
	streambench.WriteTable(stdout, rs)
	if err != nil {
		return err
	}
	if jsonPath != "" {
		b, _ := json.MarshalIndent(rs, "", "  ")
		return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
	}
	return nil
}

// parseBinaries reads LABEL=PATH,...; empty finds one kvgate.
func parseBinaries(s string) ([]streambench.Binary, error) {
	if s == "" {
		p, err := routers.FindKvgate("")
		return []streambench.Binary{{Label: "kvgate", Path: p}}, err
	}
	var out []streambench.Binary
	for _, part := range strings.Split(s, ",") {
		label, path, ok := strings.Cut(part, "=")
		if !ok {
			label, path = fmt.Sprintf("kvgate%d", len(out)+1), part
		}
		out = append(out, streambench.Binary{Label: label, Path: path})
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
