package main

import (
	"io"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
)

// TestMultimodalFlag: --multimodal makes the vLLM bridge announce
// MULTIMODAL (off by default: vLLM does not say whether its model takes
// images) and keep processed images (--multimodal-cache-bytes, 0 none);
// with another engine kind or a hand-off role it is refused by name.
func TestMultimodalFlag(t *testing.T) {
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	for _, on := range []bool{false, true} {
		args := base
		if on {
			args = append(append([]string{}, base...), "--multimodal")
		}
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		e := vllm.NewEngine(cfg.engineURL, cfg.model, nil, nil)
		cfg.vision(e)
		vb := &vllmBridge{Bridge: vllm.NewBridge(e, vllm.NewTranslator(nil, nil), 1, 64), c: cfg}
		if got := vb.handshake().Features&wire.FeatureMultimodal != 0; got != on {
			t.Errorf("--multimodal=%v: MULTIMODAL announced %v", on, got)
		}
		if (e.Renders != nil) != on {
			t.Errorf("--multimodal=%v: render cache %v", on, e.Renders)
		}
	}
	cfg, err := parseFlags(append(append([]string{}, base...), "--multimodal", "--multimodal-cache-bytes", "0"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := vllm.NewEngine(cfg.engineURL, cfg.model, nil, nil)
	if cfg.vision(e); !e.Multimodal || e.Renders != nil {
		t.Errorf("--multimodal-cache-bytes 0: multimodal %v, cache %v", e.Multimodal, e.Renders)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--multimodal", "--engine-kind", "sglang"}, "only with --engine-kind vllm"},
		{[]string{"--multimodal", "--engine-kind", "llamacpp"}, "only with --engine-kind vllm"},
		{[]string{"--multimodal", "--role", "prefill"}, "not with --role prefill"},
		{[]string{"--multimodal", "--multimodal-cache-bytes", "-1"}, "must not be negative"},
	} {
		if _, err := parseFlags(append(append([]string{}, base...), bad.args...), io.Discard); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.args, err, bad.want)
		}
	}
}
