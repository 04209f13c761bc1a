package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/kvgate/kvgate/perf/gguf"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// TestFlushRealLlamaCpp erases a real llama-server's slots: a prompt
// cached before the flush is computed again after it, as the server's own
// counters and its answer say; a server without --slot-save-path is
// refused with ErrNoErase.
func TestFlushRealLlamaCpp(t *testing.T) {
	model := llamacpptest.Model(t, gguf.Defaults())
	srv := llamacpptest.Start(t, llamacpp.Config{Model: model, Parallel: 2, CtxSize: 4096,
		Args: []string{"--cache-ram", "0", "--slot-save-path", t.TempDir()}})
	t.Cleanup(llamaClient.CloseIdleConnections)
	prompt := make([]int, 300)
	for i := range prompt {
		prompt[i] = 1000 + i*7
	}
	complete := func() (cacheN int) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 2, "cache_prompt": true})
		resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Timings struct {
				CacheN int `json:"cache_n"`
			} `json:"timings"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("completion: status %d, %v", resp.StatusCode, err)
		}
		return r.Timings.CacheN
	}
	defer http.DefaultClient.CloseIdleConnections()
	ctx := context.Background()
	urls := []string{srv.URL}
	complete()
	if n := complete(); n < len(prompt)-1 {
		t.Fatalf("the repeated prompt reused %d tokens, want %d", n, len(prompt)-1)
	}
	fl, err := flushLlamaCpp(ctx, urls)
	if err != nil {
		t.Fatal(err)
	}
	if fl.Slots != 2 || fl.ErasedTokens < len(prompt) {
		t.Errorf("flush = %+v, want 2 slots and at least %d tokens", *fl, len(prompt))
	}
	before, err := readCounters(ctx, urls)
	if err != nil {
		t.Fatal(err)
	}
	if n := complete(); n != 0 {
		t.Errorf("after the flush the prompt reused %d tokens, want 0", n)
	}
	after, err := readCounters(ctx, urls)
	if err != nil {
		t.Fatal(err)
	}
	var run engineRun
	run.difference(urls, before, after)
	if run.CachedTokens != 0 || run.PromptTokens != float64(len(prompt)) {
		t.Errorf("counters over the run after the flush: %+v, want %d computed and none cached", run, len(prompt))
	}

	plain := llamacpptest.Start(t, llamacpp.Config{Model: model})
	if _, err := flushLlamaCpp(ctx, []string{plain.URL}); !errors.Is(err, ErrNoErase) {
		t.Errorf("a server without --slot-save-path: err = %v, want ErrNoErase", err)
	}
}
