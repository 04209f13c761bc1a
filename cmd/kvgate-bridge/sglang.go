package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// checkSGLang refuses, by name, the flags an SGLang server cannot honour:
// adapters (SGLang publishes lora_id None and no extra keys, so an
// adapter's blocks could not be indexed apart from the base model's) and
// vLLM's offloading connector's block size.
func (c *config) checkSGLang(fs *flag.FlagSet) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "lora", "lora-adapter", "max-loras", "offload-block-size":
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%s: not with --engine-kind sglang (SGLang's KV events carry no adapter, so an adapter's blocks cannot be told from the base model's, and it has no offloading connector)",
			strings.Join(bad, ", "))
	}
	return nil
}

// connectSGLang reads the SGLang server's /get_server_info, retrying one
// that does not answer yet (it is loading the model) for --connect-timeout,
// and checks it against the flags: a server that differs, or is not
// SGLang, is refused.
func connectSGLang(ctx context.Context, c *config, client *http.Client, log *slog.Logger) (*vllm.SGLangServer, error) {
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	for logged := false; ; {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := vllm.FetchSGLangServer(rctx, client, c.engineURL)
		rcancel()
		switch {
		case errors.Is(err, vllm.ErrSGLangMismatch):
			return nil, fmt.Errorf("%w: %w", errRefused, err)
		case err == nil:
			if err := s.Check(c.model, c.blockSize, c.dpRanks, c.kvEvents != ""); err != nil {
				return nil, fmt.Errorf("%w: %w", errRefused, err)
			}
			log.Info("SGLang server checked", "engine", c.engineURL, "version", s.Version, "model", s.ServedModelName,
				"page_size", s.PageSize, "dp_size", max(s.DPSize, 1), "kv_pool_tokens", s.MaxTotalNumTokens,
				"priority_scheduling", s.PriorityScheduling, "metrics", s.EnableMetrics)
			if !s.EnableMetrics {
				log.Warn("the SGLang server runs without --enable-metrics: LOAD reports carry no queue or usage", "engine", c.engineURL)
			}
			return s, nil
		}
		if !logged {
			log.Info("waiting for the SGLang server to answer", "engine", c.engineURL, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the SGLang server at %s did not answer within --connect-timeout %v: %w", c.engineURL, c.connectTimeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
