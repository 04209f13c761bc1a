package vllm_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestFakeSGLangEncoding: the fake SGLang writes SGLang's batches byte for
// byte as the hand-written golden vector has them, and a negative hash as
// the msgpack int64 SGLang's Python int is.
func TestFakeSGLangEncoding(t *testing.T) {
	pos := vllmtest.IntHash(0x1122334455667788)
	golden := vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{pos}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{pos}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "CPU_PINNED"},
		{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{pos}, Medium: "CPU_PINNED"},
		{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{pos}, Medium: "GPU"}}}
	if got, want := vllmtest.EncodeBatch(vllmtest.SGLang, &golden), readHex(t, "sglang_medium.hex"); !bytes.Equal(got, want) {
		t.Fatalf("encoded % x\nwant    % x", got, want)
	}
	neg := vllm.Batch{TS: 1, HasRank: true, DPRank: 1, Events: []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(0xddccbbaa99887767)}, Parent: pos, TokenIDs: []uint32{3, 4}, BlockSize: 2, Medium: "GPU"}}}
	payload := vllmtest.EncodeBatch(vllmtest.SGLang, &neg)
	if !bytes.Contains(payload, []byte{0x91, 0xd3, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x67}) {
		t.Fatalf("the negative hash is not an int64: % x", payload)
	}
	if back, err := vllm.DecodeBatch(payload); err != nil || !reflect.DeepEqual(*back, neg) {
		t.Fatalf("decoded %+v (%v), want %+v", back, err, neg)
	}
}

// TestFakeSGLangEvents: the fake SGLang's events come one per page, of
// page-size blocks, each chained to the page before it; translated, they
// are the fake's cache through warm-up and eviction, nothing skipped.
func TestFakeSGLangEvents(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 12, vllmtest.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	var mu sync.Mutex
	var batches []*vllm.Batch
	tr := vllm.NewTranslator(hasher(t), nil)
	sub := &vllm.Subscriber{Endpoint: f.EventsURL, ReplayEndpoint: f.ReplayURL, Log: slog.New(slog.DiscardHandler),
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, ReplayTimeout: 10 * time.Second,
		Batch: func(_ uint64, b *vllm.Batch) {
			mu.Lock()
			batches = append(batches, b)
			mu.Unlock()
			tr.Apply(0, b.Events)
		},
		Lost: func(string) { tr.Reset(0) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	seed := 0
	waitTiers(t, f, tr, true, &seed)
	for i := range 8 { // 24 pages through a 12-page pool
		f.Serve(tokens(100 + i))
	}
	waitTiers(t, f, tr, false, &seed)
	if s := tr.Skipped(); s != (vllm.Skipped{}) {
		t.Fatalf("skipped %+v", s)
	}
	// The same blocks, not only as many (a full pool stays full while the
	// translator catches up: wait for the set).
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		want, err := f.KVHashes(hasher(t), nil)
		if got := snapshotSet(tr); err != nil || got != want {
			return fmt.Errorf("translated %+v, the fake holds %+v (%v)", got, want, err)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	removed := 0
	for _, b := range batches {
		if !b.HasRank || b.DPRank != 0 {
			t.Fatalf("batch without attn_dp_rank 0: %+v", b)
		}
		for i, ev := range b.Events {
			if len(ev.BlockHashes) != 1 {
				t.Fatalf("an event of %d pages: %+v", len(ev.BlockHashes), ev)
			}
			if ev.Kind == vllm.BlockRemoved {
				removed++
			}
			if ev.Kind == vllm.BlockStored && (ev.BlockSize != 4 || len(ev.TokenIDs) != 4 || ev.Medium != "GPU" ||
				i > 0 && b.Events[i-1].Kind == vllm.BlockStored && ev.Parent != b.Events[i-1].BlockHashes[0]) {
				t.Fatalf("stored page %+v after %+v", ev, b.Events[max(i-1, 0)])
			}
		}
	}
	if removed == 0 {
		t.Fatal("no page was evicted")
	}
}

// snapshotSet is a translator's rank-0 table as a router's index
// summarises it.
func snapshotSet(tr *vllm.Translator) vllmtest.TierSet {
	var s vllmtest.TierSet
	for _, e := range tr.Snapshot(0) {
		for _, h := range e.Hashes.AppendTo(nil) {
			s.Blocks[e.Tier]++
			s.Sums[e.Tier] += h
		}
	}
	return s
}

// TestFakeSGLangDPMetrics: a DP-attention server's gauges are read per
// dp_rank: each rank's queue and pool are its own.
func TestFakeSGLangDPMetrics(t *testing.T) {
	dp, err := vllmtest.StartSGLangDP("m", 4, 12, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	dp.Ranks[1].SetQueued(5)
	dp.Ranks[0].Serve(tokens(1))
	m, err := vllm.ScrapeMetrics(context.Background(), http.DefaultClient, dp.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	loads := vllm.Loads(m, 2, 0, 4)
	if len(m) != 2 || loads[0].Waiting != 0 || loads[1].Waiting != 5 || loads[0].Tiers[0].Total != 12 || loads[1].Tiers[0].Total != 12 ||
		loads[0].Tiers[0].Used != uint64(dp.Ranks[0].Blocks()) || loads[1].Tiers[0].Used != 0 {
		t.Fatalf("metrics %+v, loads %+v", m, loads)
	}
}
