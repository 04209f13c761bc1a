package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
)

// TestEngineKindFlags: --engine-kind takes vllm (the default), sglang or
// llamacpp; the vLLM-only flags are refused with llamacpp and sglang, by
// name.
func TestEngineKindFlags(t *testing.T) {
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	for _, c := range []struct {
		args []string
		kind string
		err  string
	}{
		{nil, kindVLLM, ""},
		{[]string{"--engine-kind", "llamacpp", "--tokenizer", "/x", "--slots-interval", "1s"}, kindLlamaCpp, ""},
		{[]string{"--engine-kind", "sglang", "--kv-events", "tcp://x:1", "--replay", "tcp://x:2", "--dp-ranks", "2"}, kindSGLang, ""},
		{[]string{"--engine-kind", "sglang", "--lora", "a", "--offload-block-size", "32"}, "", "--lora, --offload-block-size: not with --engine-kind sglang"},
		{[]string{"--engine-kind", "tgi"}, "", `--engine-kind "tgi": want vllm, sglang or llamacpp`},
		{[]string{"--engine-kind", "llamacpp", "--kv-events", "tcp://x:1", "--lora", "a"}, "", "--kv-events, --lora: not with --engine-kind llamacpp"},
		{[]string{"--engine-kind", "llamacpp", "--dp-ranks", "2"}, "", "--dp-ranks: not with"},
		{[]string{"--kv-events", "tcp://x:1", "--dp-ranks", "2"}, kindVLLM, ""},
	} {
		c2, err := parseFlags(append(append([]string{}, base...), c.args...), io.Discard)
		switch {
		case c.err == "" && (err != nil || c2.engineKind != c.kind):
			t.Errorf("%q: %v, kind %v", c.args, err, c2)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want %q", c.args, err, c.err)
		}
	}
}

func TestOffloadBlockSizeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--offload-block-size", "64"}, true},
		{[]string{"--offload-block-size", "24"}, false},
		{[]string{"--offload-block-size", "-16"}, false},
		{[]string{"--block-size", "0", "--offload-block-size", "64"}, false},
	} {
		args := append([]string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}, c.args...)
		cfg, err := parseFlags(args, io.Discard)
		if (err == nil) != c.ok {
			t.Errorf("%v: %v", c.args, err)
		}
		if c.ok && cfg.offloadBlockSize != 64 {
			t.Errorf("%v: offload block size %d", c.args, cfg.offloadBlockSize)
		}
	}
}

// TestLoRAAdapterFlags: --lora-adapter NAME=SOURCE adds a loadable adapter
// after the --lora ones (ids counting on), --max-loras sets the slots, and
// either turns residency on; bad values are refused by name.
func TestLoRAAdapterFlags(t *testing.T) {
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	c, err := parseFlags(append(base, "--lora", "static", "--lora-adapter", "sql=/ad/sql", "--lora-adapter", "chat=hub/chat", "--max-loras", "4"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.residentAdapters())
	if want := "[{static 1 } {sql 2 /ad/sql} {chat 3 hub/chat}]"; got != want || c.maxLoRAs != 4 || !c.residencyOn() {
		t.Fatalf("adapters %s (want %s), slots %d, on %v", got, want, c.maxLoRAs, c.residencyOn())
	}
	if c, err := parseFlags(append(base, "--lora", "static"), io.Discard); err != nil || c.residencyOn() {
		t.Fatalf("--lora alone: %v, residency %v", err, c.residencyOn())
	}
	for _, bad := range [][]string{
		{"--lora-adapter", "sql"}, {"--lora-adapter", "=/x"}, {"--lora-adapter", "a=/x", "--lora-adapter", "a=/y"},
		{"--max-loras", "0"}, {"--engine-kind", "sglang", "--lora-adapter", "a=/x"}, {"--engine-kind", "llamacpp", "--max-loras", "2"},
	} {
		if _, err := parseFlags(append(append([]string{}, base...), bad...), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTierFlags: the lower tiers' flags become the handshake's capacities
// and tier costs (links only for tiers given a bandwidth); a latency
// without a bandwidth and the flags with llamacpp are refused.
func TestTierFlags(t *testing.T) {
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	c, err := parseFlags(append(base, "--cpu-blocks", "100", "--disk-blocks", "400", "--block-bytes", "2048",
		"--cpu-bandwidth", "25", "--cpu-latency", "10us", "--lora-adapter", "a=/ad/a"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := vllm.NewEngine(c.engineURL, c.model, nil, nil)
	e.Residency = c.newResidency(e, nil)
	vb := &vllmBridge{Bridge: vllm.NewBridge(e, vllm.NewTranslator(nil, c.loras), 1, 64), c: c}
	vb.Tiers, vb.lowerTiers = c.tiers, c.tiers.Capacities(nil)
	hs := vb.handshake()
	if got := fmt.Sprint(hs.Tiers); got != "[{gpu 64} {cpu 100} {disk 400}]" {
		t.Fatalf("tiers %s", got)
	}
	if got := fmt.Sprint(hs.TierCosts); got != "{2048 [{cpu 10000 25000000000}]}" {
		t.Fatalf("tier costs %s", got)
	}
	if hs.Features&wire.FeatureAdapters == 0 || fmt.Sprint(hs.LoRAs) != "[{1 a}]" {
		t.Fatalf("features %b, adapters %v", hs.Features, hs.LoRAs)
	}
	for _, bad := range [][]string{{"--cpu-latency", "1us"}, {"--disk-bandwidth", "-1"}, {"--engine-kind", "llamacpp", "--cpu-blocks", "10"}} {
		if _, err := parseFlags(append(append([]string{}, base...), bad...), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestResidencySlots: without --max-loras the bridge takes vLLM's own from
// its metrics (vllm:lora_requests_info), else vLLM's default of 1; the
// flag wins over the engine's.
func TestResidencySlots(t *testing.T) {
	f, err := vllmtest.Start("m", 16, 100, vllmtest.Tagged, vllmtest.WithMaxLoRAs(6))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := vllm.NewEngine(f.URL, "m", nil, slog.New(slog.DiscardHandler))
	m, err := vllm.ScrapeMetrics(context.Background(), e.Client, f.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"--engine-url", f.URL, "--model", "m", "--lora-adapter", "a=/ad/a"}
	for _, c := range []struct {
		args  []string
		em    *vllm.EngineMetrics
		slots int
	}{{nil, m[0], 6}, {nil, nil, 1}, {[]string{"--max-loras", "2"}, m[0], 2}} {
		cfg, err := parseFlags(append(append([]string{}, base...), c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if r := cfg.newResidency(e, c.em); r == nil || r.Slots != c.slots {
			t.Errorf("%q with metrics %v: %+v, want %d slots", c.args, c.em != nil, r, c.slots)
		}
	}
}
