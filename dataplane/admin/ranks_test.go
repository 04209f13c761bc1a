package admin

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

// TestRankMetrics: every data-parallel rank of a wire engine has its own
// series: the blocks the index holds for it, this replica's load on it and
// what its own LOAD reports say, with one rank's apart from another's.
func TestRankMetrics(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.DPRanks, cfg.LoadInterval, cfg.Rank.Profile = 2, 5*time.Millisecond, sim.ZeroProfile
	pool := simEnginePool(t, cfg)
	e := pool.Engines()[0]
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		for r := range uint16(2) {
			if l, _, _ := e.RankLoadReport(r); l == nil {
				return errors.New("a rank has not reported LOAD")
			}
		}
		return nil
	})
	slot, _ := e.RankSlot(1)
	if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Hashes: []uint64{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	r := route.New(pool, route.PolicyKV, route.DefaultWeights())
	d, err := r.Route(&route.Request{Model: "kvgate/sim", Tokens: make([]uint32, 64)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Done()
	reg := prometheus.NewPedanticRegistry()
	RegisterEngines(reg, pool, r, nil)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "kvgate_rank_") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() != "engine" {
					key += " " + l.GetName() + "=" + l.GetValue()
				} else if l.GetValue() != e.Addr {
					t.Fatalf("%s of engine %q", f.GetName(), l.GetValue())
				}
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	chosen := map[uint16]string{0: "rank=0", 1: "rank=1"}[d.Rank]
	for series, want := range map[string]float64{
		"kvgate_rank_cached_blocks rank=1 tier=gpu": 3, "kvgate_rank_cached_blocks rank=0 tier=gpu": 0,
		"kvgate_rank_inflight_requests " + chosen: 1, "kvgate_rank_inflight_prefill_tokens " + chosen: 64,
		"kvgate_rank_reported_queued_prefill_tokens rank=0": 0, "kvgate_rank_reported_queued_prefill_tokens rank=1": 0,
		"kvgate_rank_reported_requests rank=1 state=waiting": 0,
	} {
		if v, ok := got[series]; !ok || v != want {
			keys := make([]string, 0, len(got))
			for k := range got {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Fatalf("%s = %v (present %v), want %v; series:\n%s", series, v, ok, want, strings.Join(keys, "\n"))
		}
	}
	other := map[uint16]string{0: "rank=1", 1: "rank=0"}[d.Rank]
	if got["kvgate_rank_inflight_requests "+other] != 0 {
		t.Fatalf("the request counts on both ranks: %v", got)
	}
}
