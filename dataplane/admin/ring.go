package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/syncring"
)

// RegisterRing adds the replica ring's metrics, read from its stats at
// scrape time: this replica's epoch, members, engines (its own and those shared by every member), rounds and bytes, and per
// peer its index similarity, load divergence and round figures.
func RegisterRing(reg prometheus.Registerer, r *syncring.Ring) {
	reg.MustRegister(&ringCollector{r: r})
}

type ringCollector struct{ r *syncring.Ring }

func ringDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("kvgate_ring_"+name, help, labels, nil)
}

var (
	descRingEpoch      = ringDesc("epoch", "Epochs this replica has been through (each membership change starts one).")
	descRingMembers    = ringDesc("members", "Replicas in the ring, this one included.")
	descRingEngines    = ringDesc("engines", "Engines this replica has (distinct keys).")
	descRingShared     = ringDesc("shared_engines", "Engines the ring's vectors cover: those every member has.")
	descRingRounds     = ringDesc("rounds_total", "All-reduce rounds by result.", "result")
	descRingRoundSecs  = ringDesc("round_seconds", "Latency of the last completed round.")
	descRingRoundBytes = ringDesc("round_bytes", "Bytes this replica sent in the last completed round.")
	descRingBytes      = ringDesc("bytes_total", "Ring bytes by direction.", "direction")
	descRingRefused    = ringDesc("refused_total", "Peer connections refused at the handshake.")
	descRingIgnored    = ringDesc("ignored_total", "Ring messages ignored: another epoch, not a member, out of turn.")
	descRingDropped    = ringDesc("dropped_total", "Peer links dropped for not keeping up.")
	descPeerMember     = ringDesc("peer_member", "1 when the peer is in this replica's ring.", "peer")
	descPeerSimilarity = ringDesc("peer_index_similarity", "Similarity of the peer's KV index digest to ours (0..1; -1 unknown).", "peer")
	descPeerDivergence = ringDesc("peer_load_divergence", "Relative difference of the fleet token load as the peer and this replica see it.", "peer")
	descPeerRoundSecs  = ringDesc("peer_round_seconds", "The peer's last round latency.", "peer")
	descPeerRoundBytes = ringDesc("peer_round_bytes", "Bytes the peer sent in its last round.", "peer")
	descPeerRounds     = ringDesc("peer_rounds_total", "The peer's rounds by result.", "peer", "result")
	descPeerEpoch      = ringDesc("peer_epoch", "Epochs the peer has been through.", "peer")
)

func (c *ringCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRingEpoch, descRingMembers, descRingEngines, descRingShared, descRingRounds, descRingRoundSecs, descRingRoundBytes,
		descRingBytes, descRingRefused, descRingIgnored, descRingDropped, descPeerMember, descPeerSimilarity, descPeerDivergence,
		descPeerRoundSecs, descPeerRoundBytes, descPeerRounds, descPeerEpoch} {
		ch <- d
	}
}

func (c *ringCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descRingEpoch, float64(st.Epoch))
	gauge(descRingMembers, float64(len(st.Members)))
	gauge(descRingEngines, float64(st.Engines))
	gauge(descRingShared, float64(st.SharedEngines))
	counter(descRingRounds, st.RoundsDone, "done")
	counter(descRingRounds, st.RoundsAbandoned, "abandoned")
	gauge(descRingRoundSecs, float64(st.RoundMicros)/1e6)
	gauge(descRingRoundBytes, float64(st.RoundBytes))
	counter(descRingBytes, st.BytesIn, "in")
	counter(descRingBytes, st.BytesOut, "out")
	counter(descRingRefused, st.Refused)
	counter(descRingIgnored, st.Ignored)
	counter(descRingDropped, st.Dropped)
	for _, p := range st.Peers {
		member := 0.0
		if p.Member {
			member = 1
		}
		gauge(descPeerMember, member, p.ID)
		gauge(descPeerSimilarity, p.Similarity, p.ID)
		gauge(descPeerDivergence, p.Divergence, p.ID)
		gauge(descPeerRoundSecs, float64(p.RoundMicros)/1e6, p.ID)
		gauge(descPeerRoundBytes, float64(p.RoundBytes), p.ID)
		counter(descPeerRounds, p.RoundsDone, p.ID, "done")
		counter(descPeerRounds, p.RoundsAbandoned, p.ID, "abandoned")
		gauge(descPeerEpoch, float64(p.Epoch), p.ID)
	}
}
