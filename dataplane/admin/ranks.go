package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
)

// rankCollector reports, at scrape time, each data-parallel rank of every
// wire engine (rank 0 alone for an engine without ranks): the blocks the
// index holds for it per tier, this replica's load in flight on it, and
// what the rank's own LOAD reports say. Routing's candidates are (engine,
// rank), so these are what it weighs.
type rankCollector struct {
	pool   *engine.Pool
	router *route.Router
}

var (
	rankLabels         = []string{"engine", "rank"}
	descRankBlocks     = prometheus.NewDesc("kvgate_rank_cached_blocks", "KV blocks the index holds for an engine's data-parallel rank, per tier (approx: guessed, no events).", []string{"engine", "rank", "tier"}, nil)
	descRankPrefill    = prometheus.NewDesc("kvgate_rank_inflight_prefill_tokens", "Prompt tokens this replica sent to the rank and not yet past their first token.", rankLabels, nil)
	descRankDecode     = prometheus.NewDesc("kvgate_rank_inflight_decode_tokens", "KV tokens of this replica's requests decoding on the rank.", rankLabels, nil)
	descRankReqs       = prometheus.NewDesc("kvgate_rank_inflight_requests", "This replica's requests in flight on the rank.", rankLabels, nil)
	descRankQueued     = prometheus.NewDesc("kvgate_rank_reported_queued_prefill_tokens", "Prompt tokens still to prefill, as the rank's last LOAD report says.", rankLabels, nil)
	descRankActive     = prometheus.NewDesc("kvgate_rank_reported_active_decode_tokens", "KV tokens decoding, as the rank's last LOAD report says.", rankLabels, nil)
	descRankScheduling = prometheus.NewDesc("kvgate_rank_reported_requests", "Requests running and waiting, as the rank's last LOAD report says.", []string{"engine", "rank", "state"}, nil)
)

func (c *rankCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRankBlocks, descRankPrefill, descRankDecode, descRankReqs, descRankQueued, descRankActive, descRankScheduling} {
		ch <- d
	}
}

func (c *rankCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	engines := c.pool.Engines()
	byAddr := make(map[string]bool, len(engines))
	for _, e := range engines {
		byAddr[e.Addr] = true
		for r := range e.Ranks() {
			rank := uint16(r)
			rs := strconv.Itoa(r)
			l := c.router.RankInflight(e, rank)
			gauge(descRankPrefill, float64(l.PrefillTokens), e.Addr, rs)
			gauge(descRankDecode, float64(l.DecodeTokens), e.Addr, rs)
			gauge(descRankReqs, float64(l.Requests), e.Addr, rs)
			if rep, _, _ := e.RankLoadReport(rank); rep != nil {
				gauge(descRankQueued, float64(rep.QueuedPrefillTokens), e.Addr, rs)
				gauge(descRankActive, float64(rep.ActiveDecodeTokens), e.Addr, rs)
				gauge(descRankScheduling, float64(rep.Running), e.Addr, rs, "running")
				gauge(descRankScheduling, float64(rep.Waiting), e.Addr, rs, "waiting")
			}
		}
	}
	// The pool registers each engine in the index by its address.
	for _, es := range c.pool.Index().Stats().Engines {
		if !byAddr[es.Engine] {
			continue
		}
		for t, n := range es.Blocks {
			gauge(descRankBlocks, float64(n), es.Engine, strconv.Itoa(es.Rank), kvstore.Tier(t).String())
		}
	}
}
