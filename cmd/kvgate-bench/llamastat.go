package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/llamacpp"
)

// counterSource says where engineRun's counts come from.
const counterSource = "llama.cpp /metrics: llamacpp:prompt_tokens_total (prompt tokens computed) and " +
	"llamacpp:prompt_tokens_cached_total (reused from the cache), differenced over the run"

// ErrNoErase is returned when a llama.cpp server refuses to erase slots.
var ErrNoErase = errors.New("kvgate-bench: llama.cpp server refuses to erase slots (start it with --slot-save-path DIR)")

// flushReport is what erasing the servers' slots dropped.
type flushReport struct {
	// Slots is the number of slots erased, ErasedTokens the tokens they
	// held (n_erased).
	Slots        int `json:"slots"`
	ErasedTokens int `json:"erased_tokens"`
}

// engineRun is one policy's run as the llama.cpp servers themselves
// counted it.
type engineRun struct {
	Source string       `json:"source"`
	Flush  *flushReport `json:"flush,omitempty"`
	// PromptTokens were computed, CachedTokens reused from a cache, over
	// all servers; HitRate is CachedTokens over their sum.
	PromptTokens float64 `json:"prompt_tokens"`
	CachedTokens float64 `json:"cached_tokens"`
	HitRate      float64 `json:"prefix_hit_rate"`
	// Imbalance is the most prompt tokens any server computed over the
	// mean of all servers.
	Imbalance float64     `json:"imbalance"`
	Servers   []serverRun `json:"servers"`
	// CPU is how busy the machine was during the run, and with what.
	CPU *cpuShare `json:"cpu,omitempty"`
}

// serverRun is one server's share of an engineRun.
type serverRun struct {
	URL          string  `json:"url"`
	PromptTokens float64 `json:"prompt_tokens"`
	CachedTokens float64 `json:"cached_tokens"`
}

// llamaCounters are one server's cumulative counters at one moment.
type llamaCounters struct{ prompt, cached float64 }

// difference fills r from the counters read before and after its run.
func (r *engineRun) difference(urls []string, before, after []llamaCounters) {
	var top float64
	for i, u := range urls {
		s := serverRun{URL: u, PromptTokens: after[i].prompt - before[i].prompt, CachedTokens: after[i].cached - before[i].cached}
		r.Servers = append(r.Servers, s)
		r.PromptTokens += s.PromptTokens
		r.CachedTokens += s.CachedTokens
		top = max(top, s.PromptTokens)
	}
	if all := r.PromptTokens + r.CachedTokens; all > 0 {
		r.HitRate = r.CachedTokens / all
	}
	if r.PromptTokens > 0 {
		r.Imbalance = top / (r.PromptTokens / float64(len(urls)))
	}
}

func (r *engineRun) print(w io.Writer) {
	per := make([]string, len(r.Servers))
	for i, s := range r.Servers {
		per[i] = fmt.Sprintf("%.0f", s.PromptTokens)
	}
	fmt.Fprintf(w, "    llama.cpp's own counters, %d servers: %.0f prompt tokens computed, %.0f from cache: hit %.3f; computed per server %s (imbalance %.2f)\n",
		len(r.Servers), r.PromptTokens, r.CachedTokens, r.HitRate, strings.Join(per, " / "), r.Imbalance)
	if r.CPU != nil {
		r.CPU.print(w)
	}
}

// llamaClient bounds every call to a llama.cpp server; an erase waits for
// a busy slot to finish its task, hence the long timeout.
var llamaClient = &http.Client{Timeout: 2 * time.Minute}

// flushLlamaCpp erases every slot of every server and checks that /slots
// then shows each of them empty.
func flushLlamaCpp(ctx context.Context, urls []string) (*flushReport, error) {
	f := &flushReport{}
	for _, u := range urls {
		slots, err := getSlots(ctx, u)
		if err != nil {
			return nil, err
		}
		for _, s := range slots {
			b, err := llamaCall(ctx, http.MethodPost, fmt.Sprintf("%s/slots/%d?action=erase", u, s.ID))
			if errors.Is(err, errNotImplemented) {
				return nil, fmt.Errorf("%w: %s: %v", ErrNoErase, u, err)
			}
			if err != nil {
				return nil, fmt.Errorf("erasing slot %d of %s: %w", s.ID, u, err)
			}
			var res struct {
				NErased int `json:"n_erased"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, fmt.Errorf("decoding the erase of slot %d of %s: %w", s.ID, u, err)
			}
			f.Slots++
			f.ErasedTokens += res.NErased
		}
		if slots, err = getSlots(ctx, u); err != nil {
			return nil, err
		}
		for _, s := range slots {
			if s.NPromptTokens != 0 || s.IsProcessing {
				return nil, fmt.Errorf("slot %d of %s still holds %d tokens after its erase (processing: %v)", s.ID, u, s.NPromptTokens, s.IsProcessing)
			}
		}
	}
	return f, nil
}

func getSlots(ctx context.Context, url string) ([]llamacpp.Slot, error) {
	b, err := llamaCall(ctx, http.MethodGet, url+"/slots")
	if err != nil {
		return nil, fmt.Errorf("reading %s/slots (llama-server --slots): %w", url, err)
	}
	return llamacpp.DecodeSlots(b)
}

// readCounters reads each server's prompt token counters.
func readCounters(ctx context.Context, urls []string) ([]llamaCounters, error) {
	out := make([]llamaCounters, len(urls))
	for i, u := range urls {
		b, err := llamaCall(ctx, http.MethodGet, u+"/metrics")
		if err != nil {
			return nil, fmt.Errorf("reading %s/metrics (llama-server --metrics): %w", u, err)
		}
		m, err := llamacpp.ParseMetrics(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decoding %s/metrics: %w", u, err)
		}
		if !m.Found {
			return nil, fmt.Errorf("%s/metrics has no llamacpp: counters", u)
		}
		out[i] = llamaCounters{prompt: m.PromptTokens, cached: m.PromptTokensCached}
	}
	return out, nil
}

// errNotImplemented marks a 501 answer: what llama-server sends for a
// feature it was started without.
var errNotImplemented = errors.New("501 not implemented")

func llamaCall(ctx context.Context, method, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := llamaClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotImplemented:
		return nil, fmt.Errorf("%w: %s", errNotImplemented, bytes.TrimSpace(b))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// baseline is the policy the ratios of the engine table are taken against.
const baseline = "round-robin"

// engineTable is a Markdown table of each policy's TTFT and hit rates,
// with ratios to round-robin's when it ran.
func (c *comparison) engineTable() string {
	var b strings.Builder
	base := c.Policies[baseline]
	baseRun := c.EngineCounters[baseline]
	b.WriteString("| policy | requests | errors | TTFT p50 ms | TTFT p99 ms | hit rate (llama.cpp counters) | hit rate (responses) | p50 round-robin / policy | p99 round-robin / policy | hit / round-robin's | other CPU use, cores |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range c.Order {
		r, run := c.Policies[p], c.EngineCounters[p]
		if run == nil {
			continue
		}
		ratios := "| | | "
		if base != nil && baseRun != nil {
			ratios = fmt.Sprintf("| %s | %s | %s ", ratio(base.TTFT.P50, r.TTFT.P50), ratio(base.TTFT.P99, r.TTFT.P99), ratio(run.HitRate, baseRun.HitRate))
		}
		others := "n/a"
		if run.CPU != nil {
			others = fmt.Sprintf("%.2f of %d", run.CPU.Others, run.CPU.CPUs)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %.3f | %.3f %s| %s |\n", p, r.Requests, r.Errors, r.TTFT.P50, r.TTFT.P99,
			run.HitRate, r.PrefixHitRate, ratios, others)
	}
	return b.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func printEngineTable(w io.Writer, c *comparison) {
	fmt.Fprintf(w, "\n%s", c.engineTable())
}

// appendEngineTable adds the engine table to the report's README.md.
func (c *comparison) appendEngineTable(dir string) error {
	if len(c.EngineCounters) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "\n## The engines' own counters\n\nFlush: %v\n\nHit rate (llama.cpp counters): %s.\n"+
		"Hit rate (responses): cached tokens over prompt tokens in the usage the responses reported.\n\n%s",
		c.Flags["flush"], counterSource, c.engineTable())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
