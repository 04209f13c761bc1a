package vllm_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

const mib = 1 << 20

// tierBridge is a bridge in front of fake f with lower tiers lt, its LOAD
// polled from f's /metrics until the test ends.
func tierBridge(t *testing.T, f *vllmtest.Fake, lt vllm.LowerTiers) *vllm.Bridge {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e := vllm.NewEngine(f.URL, "m", nil, log)
	b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), 1, 0)
	b.Tiers = lt
	e.Out = serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4, Models: []string{"m"}}, Logger: log}, b)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go b.PollLoad(ctx, f.URL+"/metrics", 5*time.Millisecond)
	return b
}

// waitLoadTiers waits for a LOAD whose tiers print as want.
func waitLoadTiers(t *testing.T, b *vllm.Bridge, want string) {
	t.Helper()
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if got := fmt.Sprint(b.Load()[0].Tiers); got != want {
			return fmt.Errorf("LOAD tiers %s, want %s", got, want)
		}
		return nil
	})
}

// TestLowerTiersFromVLLMOffloading: vLLM's native offloading: the CPU
// tier's size is its --kv-offloading-size (cache_config_info) over the
// block's bytes, in the handshake and in LOAD; its use is the blocks the
// connector's events put there.
func TestLowerTiersFromVLLMOffloading(t *testing.T) {
	f := startFake(t, vllmtest.WithKVOffloading(0.5, "native"))
	lt := vllm.LowerTiers{BlockBytes: mib, Links: []wire.TierLink{{Tier: wire.TierCPU, LatencyNanos: 8000, BytesPerSecond: 20e9}}}
	m, err := vllm.ScrapeMetrics(context.Background(), vllm.NewEngine(f.URL, "m", nil, nil).Client, f.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if em := m[0]; em.OffloadGiB != 0.5 || em.OffloadBackend != "native" || em.HasLMCache {
		t.Fatalf("metrics %+v", em)
	}
	if got := fmt.Sprint(lt.Capacities(m[0])); got != "[{cpu 512}]" {
		t.Fatalf("handshake tiers %s, want the CPU tier of 512 blocks", got)
	}
	if tc := lt.Costs(); tc.BlockBytes != mib || len(tc.Links) != 1 || tc.Links[0].BytesPerSecond != 20e9 {
		t.Fatalf("tier costs %+v", tc)
	}
	b := tierBridge(t, f, lt)
	gpu := []vllm.Hash{vllmtest.BytesHash(rawHash(1)), vllmtest.BytesHash(rawHash(2)), vllmtest.BytesHash(rawHash(3))}
	b.Events(0, &vllm.Batch{Events: []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: gpu, TokenIDs: prompt(12), BlockSize: 4, Medium: "GPU"},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.BytesHash(rawHash(1)), vllmtest.BytesHash(rawHash(2))}, BlockSize: 4, Medium: "CPU"},
	}})
	waitLoadTiers(t, b, "[{gpu 0 1000} {cpu 2 512}]")
	b.Events(0, &vllm.Batch{Events: []vllm.Event{{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.BytesHash(rawHash(2))}, Medium: "CPU"}}})
	waitLoadTiers(t, b, "[{gpu 0 1000} {cpu 1 512}]")
}

// TestLowerTiersFromLMCache: LMCache publishes its tiers' use in bytes
// (summed over its workers' series), not their size: the use comes from
// its gauges over the block's bytes, the size from the flags; without the
// block's bytes its bytes cannot be counted in blocks, and without a size
// or a use a tier is left out of LOAD.
func TestLowerTiersFromLMCache(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 4, vllmtest.Tagged, vllmtest.WithOffload(16, true), vllmtest.WithLMCacheGauges(mib, 3*mib))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.Serve(prompt(32)) // 8 blocks through a GPU of 4: 4 copied to the CPU tier
	if f.CPUBlocks() != 4 {
		t.Fatalf("fake CPU tier %d", f.CPUBlocks())
	}
	b := tierBridge(t, f, vllm.LowerTiers{BlockBytes: mib, CPUBlocks: 100, DiskBlocks: 50})
	waitLoadTiers(t, b, "[{gpu 4 4} {cpu 4 100} {disk 3 50}]")

	unsized := tierBridge(t, f, vllm.LowerTiers{CPUBlocks: 100})
	waitLoadTiers(t, unsized, "[{gpu 4 4} {cpu 0 100}]")
}

// TestLowerTiersAddUsage: a use over the announced size is clamped to it;
// a tier known only by its use is reported with size 0.
func TestLowerTiersAddUsage(t *testing.T) {
	var l wire.Load
	lt := vllm.LowerTiers{BlockBytes: 10, CPUBlocks: 5}
	lt.AddUsage(&l, &vllm.EngineMetrics{HasLMCache: true, LMCacheCPUBytes: 90, LMCacheDiskBytes: 25}, [wire.NumTiers]uint64{})
	if got := fmt.Sprint(l.Tiers); got != "[{cpu 5 5} {disk 2 0}]" {
		t.Fatalf("tiers %s", got)
	}
	l.Tiers = nil
	(&vllm.LowerTiers{}).AddUsage(&l, nil, [wire.NumTiers]uint64{0, 0, 7})
	if got := fmt.Sprint(l.Tiers); got != "[{disk 7 0}]" {
		t.Fatalf("tiers from events only %s", got)
	}
}
