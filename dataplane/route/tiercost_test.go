package route

import (
	"math"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TestBusyCPUHitVersusIdleGPUMiss: engine a holds the whole prompt in CPU
// memory but has prefill queued; engine b is idle and holds nothing. a is
// the better choice exactly while its queue plus the transfer is shorter
// than b's full prefill, so the decision turns at the queue length where
// the two estimates meet, computed here from the links, on both sides. A
// link slower than recomputing (a PCIe 4.0 NVMe SSD against this prefill
// rate, or any link made slow enough) loses even with no queue.
func TestBusyCPUHitVersusIdleGPUMiss(t *testing.T) {
	w := DefaultWeights()
	const n, bs = 8192, 16
	lower := uint32((n - 1) / bs) // every full block but the one the engine computes
	for _, tc := range []struct {
		name string
		tier kvstore.Tier
		link wire.TierLink // what engine a announces
	}{
		{"cpu-pcie4", kvstore.TierCPU, wire.TierLink{Tier: wire.TierCPU, LatencyNanos: 10_000, BytesPerSecond: 25e9}},
		{"cpu-pcie5", kvstore.TierCPU, wire.TierLink{Tier: wire.TierCPU, LatencyNanos: 10_000, BytesPerSecond: 50e9}},
		{"disk-nvme5", kvstore.TierDisk, wire.TierLink{Tier: wire.TierDisk, LatencyNanos: 100_000, BytesPerSecond: 14e9}},
		{"disk-nvme4", kvstore.TierDisk, wire.TierLink{Tier: wire.TierDisk, LatencyNanos: 100_000, BytesPerSecond: 7.45e9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			announced := wire.TierCosts{BlockBytes: 2359296, Links: []wire.TierLink{tc.link}}
			a := Candidate{BlockSize: bs, MaxBatched: 8192, CapacityTokens: 1 << 20, Tiers: w.TierCostsOf(&announced, bs)}
			a.Match.Blocks[tc.tier] = lower
			b := Candidate{BlockSize: bs, MaxBatched: 8192, CapacityTokens: 1 << 20}
			transfer := float64(tc.link.LatencyNanos)/1e6 + float64(lower)*2359296/(float64(tc.link.BytesPerSecond)/1e3)
			idleMiss := w.Cost(PolicyKV, &b, n)
			// a's estimate: (queue + the one uncached block) / rate + transfer.
			turn := w.PrefillTokensPerMs*(idleMiss-transfer) - (n - float64(lower)*bs)
			if turn <= 0 {
				// 511 blocks at 7.45 GB/s take 162 ms; recomputing 8,192 tokens 124 ms.
				if hit := w.Cost(PolicyKV, &a, n); hit <= idleMiss || tc.name != "disk-nvme4" {
					t.Fatalf("%s: idle hit %.1f ms, idle miss %.1f ms, transfer %.1f ms", tc.name, hit, idleMiss, transfer)
				}
				return
			}
			for _, q := range []struct {
				queued float64
				aWins  bool
			}{{0, true}, {turn * 0.9, true}, {turn * 1.1, false}, {turn * 3, false}} {
				a.QueuedPrefill = q.queued
				busyHit := w.Cost(PolicyKV, &a, n)
				if (busyHit < idleMiss) != q.aWins {
					t.Errorf("queue %.0f (turn at %.0f): busy %s hit %.1f ms, idle miss %.1f ms; want the hit to win: %v",
						q.queued, turn, tc.tier, busyHit, idleMiss, q.aWins)
				}
			}
			// The same hit over a link eight times slower than recomputing loses idle.
			slow := tc.link
			slow.BytesPerSecond = uint64(float64(lower) * 2359296 / (idleMiss * 8) * 1e3)
			announced.Links[0] = slow
			a.Tiers, a.QueuedPrefill = w.TierCostsOf(&announced, bs), 0
			if hit := w.Cost(PolicyKV, &a, n); hit <= idleMiss {
				t.Errorf("a %d B/s link: idle hit %.1f ms beats recomputing %.1f ms", slow.BytesPerSecond, hit, idleMiss)
			}
		})
	}
}

func TestTierCostsOf(t *testing.T) {
	w := DefaultWeights()
	// Nothing announced: the defaults, the block's bytes from its size.
	d := w.TierCostsOf(&wire.TierCosts{}, 16)
	if d.BlockBytes != 147456*16 || d.Links[kvstore.TierCPU] != DefaultCPULink || d.Links[kvstore.TierDisk] != DefaultDiskLink {
		t.Fatalf("defaults %+v", d)
	}
	// 100 blocks over PCIe 4.0 x16: 10 us + 100 x 2,359,296 B / 25 GB/s.
	if got, want := d.TransferMs(kvstore.TierCPU, 100), 0.01+9.437184; math.Abs(got-want) > 1e-9 {
		t.Fatalf("transfer %v ms, want %v", got, want)
	}
	if d.TransferMs(kvstore.TierCPU, 0) != 0 {
		t.Fatal("no blocks, no latency")
	}
	// An announcement replaces what it names and keeps the rest.
	a := w.TierCostsOf(&wire.TierCosts{BlockBytes: 1 << 20, Links: []wire.TierLink{{Tier: wire.TierDisk, LatencyNanos: 2_000_000, BytesPerSecond: 1e9}}}, 16)
	if a.BlockBytes != 1<<20 || a.Links[kvstore.TierCPU] != DefaultCPULink || a.Links[kvstore.TierDisk] != (TierLink{LatencyMs: 2, BytesPerMs: 1e6}) {
		t.Fatalf("announced %+v", a)
	}
}

// TestCPUBlockCostOverride: a CPUBlockCost set (not negative) weighs CPU
// blocks at that fraction of recomputing and no transfer, as before tier
// costs; DiskBlockCost likewise, each on its own.
func TestCPUBlockCostOverride(t *testing.T) {
	w := DefaultWeights()
	w.CPUBlockCost = 0.2
	c := Candidate{BlockSize: 16, MaxBatched: 8192, CapacityTokens: 1 << 20}
	c.Match.Blocks[kvstore.TierCPU] = 200
	if got, want := w.Cost(PolicyKV, &c, 4096), (4096-16*200*0.8)/w.PrefillTokensPerMs; math.Abs(got-want) > 1e-9 {
		t.Fatalf("cpu override: %v, want %v", got, want)
	}
	c.Match.Blocks[kvstore.TierDisk] = 10 // disk still by transfer time
	d := w.TierCostsOf(&wire.TierCosts{}, 16)
	if got, want := w.Cost(PolicyKV, &c, 4096), (4096-16*200*0.8-16*10)/w.PrefillTokensPerMs+d.TransferMs(kvstore.TierDisk, 10); math.Abs(got-want) > 1e-9 {
		t.Fatalf("cpu override, disk by transfer: %v, want %v", got, want)
	}
}
