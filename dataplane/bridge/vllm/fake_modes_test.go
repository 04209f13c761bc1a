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
)

// tierCounts is a translator's blocks per wire tier and its LoRA blocks
// (any tier), from its snapshot: what every router's index holds.
func tierCounts(tr *vllm.Translator) (gpu, cpu, lora int) {
	for _, e := range tr.Snapshot(0) {
		switch e.Tier {
		case wire.TierGPU:
			gpu++
		case wire.TierCPU:
			cpu++
		}
		if e.LoRAID != 0 {
			lora++
		}
	}
	return gpu, cpu, lora
}

// translated runs a subscriber (with replay) into a translator that knows
// loras until the test ends.
func translated(t *testing.T, f *vllmtest.Fake, loras []vllm.LoRA) *vllm.Translator {
	t.Helper()
	tr := vllm.NewTranslator(hasher(t), loras)
	sub := &vllm.Subscriber{Endpoint: f.EventsURL, ReplayEndpoint: f.ReplayURL, Log: slog.New(slog.DiscardHandler),
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, ReplayTimeout: 10 * time.Second,
		Batch: func(_ uint64, b *vllm.Batch) { tr.Apply(0, b.Events) },
		Lost:  func(string) { tr.Reset(0) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr
}

// waitTiers waits until the translator holds the fake's GPU and CPU
// blocks; each failed look serves one more prompt (from seed on) while
// nudge, as a subscription that is still landing misses what precedes it.
func waitTiers(t *testing.T, f *vllmtest.Fake, tr *vllm.Translator, nudge bool, seed *int) {
	t.Helper()
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		gpu, cpu, _ := tierCounts(tr)
		if gpu == f.Blocks() && cpu == f.CPUBlocks() && gpu > 0 {
			return nil
		}
		if nudge {
			*seed++
			f.Serve(tokens(*seed))
		}
		return fmt.Errorf("translated %d GPU and %d CPU blocks, the engine holds %d and %d (skipped %+v)",
			gpu, cpu, f.Blocks(), f.CPUBlocks(), tr.Skipped())
	})
}

// TestFakeOffloading: with WithOffload, the GPU blocks the fake evicts are
// announced as CPU copies (raw-bytes hashes, no tokens) in the batch that
// evicts them, and the CPU tier's own evictions as CPU removals: the
// translator's GPU and CPU tiers equal the fake's in every encoding, with
// block_size 0 and the real size, nothing skipped.
func TestFakeOffloading(t *testing.T) {
	for _, enc := range []vllmtest.Encoding{vllmtest.Positional, vllmtest.Tagged, vllmtest.PositionalCurrent} {
		for _, sendSize := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/size=%v", enc, sendSize), func(t *testing.T) {
				f, err := vllmtest.Start("m", 4, 12, enc, vllmtest.WithOffload(9, sendSize))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(f.Close)
				tr := translated(t, f, nil)
				seed := 0
				waitTiers(t, f, tr, true, &seed)
				for i := range 8 { // 24 blocks through a 12-block GPU and a 9-block CPU tier
					f.Serve(tokens(100 + i))
				}
				if f.Blocks() != 12 || f.CPUBlocks() != 9 {
					t.Fatalf("the fake holds %d GPU and %d CPU blocks, want full tiers of 12 and 9", f.Blocks(), f.CPUBlocks())
				}
				waitTiers(t, f, tr, false, &seed)
				// A prompt served again from the CPU tier comes back to the GPU:
				// its blocks are then held in both tiers.
				var back []uint32
				for i := range 8 {
					if hs := f.BlockHashes(tokens(100 + i)); f.CachedCPU(hs[0]) && !f.Cached(hs[0]) {
						back = tokens(100 + i)
						break
					}
				}
				if back == nil {
					t.Fatal("no prompt is in the CPU tier only")
				}
				f.Serve(back)
				waitTiers(t, f, tr, false, &seed)
				if s := tr.Skipped(); s != (vllm.Skipped{}) {
					t.Fatalf("skipped %+v", s)
				}
			})
		}
	}
}

// TestFakeLoRA: with WithLoRA, an adapter's blocks carry its name (and id)
// as current vLLM publishes them; a translator that knows the adapter
// indexes them under its wire id, apart from the base model's blocks of the
// same tokens.
func TestFakeLoRA(t *testing.T) {
	for _, enc := range []vllmtest.Encoding{vllmtest.Positional, vllmtest.Tagged, vllmtest.PositionalCurrent} {
		t.Run(fmt.Sprint(enc), func(t *testing.T) {
			f, err := vllmtest.Start("m", 4, 100, enc, vllmtest.WithLoRA("sql", 7))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			tr := translated(t, f, []vllm.LoRA{{Name: "sql", VLLMID: 7, WireID: 1}})
			seed := 0
			waitTiers(t, f, tr, true, &seed)
			before := f.Blocks()
			f.ServeLoRA("sql", tokens(1))
			f.ServeLoRA("sql", tokens(2))
			if f.Blocks() != before+6 {
				t.Fatalf("the adapter's blocks share the base model's: %d blocks, want %d", f.Blocks(), before+6)
			}
			checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				if gpu, _, lora := tierCounts(tr); gpu != f.Blocks() || lora != 6 {
					return fmt.Errorf("translated %d blocks (%d LoRA), the engine holds %d (6 LoRA); skipped %+v", gpu, lora, f.Blocks(), tr.Skipped())
				}
				return nil
			})
			if s := tr.Skipped(); s != (vllm.Skipped{}) {
				t.Fatalf("skipped %+v", s)
			}
		})
	}
}

// TestFakeLoRAOffloaded: an adapter's blocks offloaded to CPU (the
// offloading events carry no LoRA fields) are the adapter's blocks in the
// CPU tier.
func TestFakeLoRAOffloaded(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 12, vllmtest.Tagged, vllmtest.WithLoRA("sql", 7), vllmtest.WithOffload(9, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	tr := translated(t, f, []vllm.LoRA{{Name: "sql", VLLMID: 7, WireID: 1}})
	seed := 0
	waitTiers(t, f, tr, true, &seed)
	f.Clear()
	for i := range 8 {
		f.ServeLoRA("sql", tokens(100+i))
	}
	waitTiers(t, f, tr, false, &seed)
	if gpu, cpu, lora := tierCounts(tr); lora != gpu+cpu || cpu != 9 {
		t.Fatalf("%d GPU and %d CPU blocks translated, %d of them the adapter's; want all 21", gpu, cpu, lora)
	}
	if s := tr.Skipped(); s != (vllm.Skipped{}) {
		t.Fatalf("skipped %+v", s)
	}
}
