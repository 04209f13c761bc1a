package admin

import (
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// State is the /debug/state document: the policy, each engine (wire
// engines, then HTTP engines) with its load as this replica, its peers and
// the engine itself see it, the index, and the ring when there is one.
type State struct {
	Policy  route.Policy    `json:"policy"`
	Engines []EngineState   `json:"engines"`
	Index   IndexState      `json:"index"`
	Ring    *syncring.Stats `json:"ring,omitempty"`
}

// Engine kinds in EngineState.
const (
	KindWire = "wire" // an engine speaking the wire protocol (--engine)
	KindHTTP = "http" // an OpenAI-compatible HTTP engine (--http-engine)
)

// EngineState is one engine in State.
type EngineState struct {
	// Addr is a wire engine's host:port, an HTTP engine's URL: the engine
	// label of its metrics.
	Addr string `json:"addr"`
	Kind string `json:"kind"`
	// ID is what a wire engine's handshake calls it (HTTP engines have none).
	ID string `json:"id"`
	// State is a wire engine's connection state; for an HTTP engine
	// "ready" when it answered its last /v1/models poll, else "down".
	State  string   `json:"state"`
	Models []string `json:"models"`
	// BlockSize is the engine's KV block size; for an HTTP engine, that of
	// kvgate's approximate index of it (passthrough.BlockSize).
	BlockSize uint32 `json:"block_size"`
	// Inflight is this replica's own load on the engine; for an HTTP
	// engine the uncached prompt tokens and the requests sent and not
	// finished (kvgate does not follow an HTTP engine's decoding).
	Inflight syncring.Load `json:"inflight"`
	// PeerLoad is the other replicas' load, from the ring.
	PeerLoad syncring.Load `json:"peer_load"`
	// ReportedLoad is the engine's last LOAD report, nil before one (and
	// for HTTP engines, which send none).
	ReportedLoad *wire.Load `json:"reported_load"`
}

// IndexState is the KV index in State.
type IndexState struct {
	Entries       uint64        `json:"entries"`
	Bytes         uint64        `json:"bytes"`
	EventsApplied uint64        `json:"events_applied"`
	Engines       []IndexEngine `json:"engines"`
}

// IndexEngine is one slot (engine and rank) of the index in State. Blocks
// are what its KV events say it holds, per tier (GPU, CPU, disk);
// ApproxBlocks, apart from them, are the guesses routing recorded for it
// while it has sent no event (Precise false).
type IndexEngine struct {
	Engine       string
	Rank         int
	Slot         kvstore.Slot
	Blocks       [kvstore.NumTiers]uint64
	ApproxBlocks uint64
	Precise      bool
	Entries      uint64
	Bytes        uint64
	// HashSums are, per tier, the wrapping sums of the hashes of Blocks
	// (from the index's digest): with Blocks, they tell two views' block
	// sets apart, not only their sizes.
	HashSums [kvstore.NumTiers]uint64
}

// Snapshot reads the state now; ring and http (the HTTP engines) may be
// nil.
func Snapshot(pool *engine.Pool, r *route.Router, index *kvstore.Index, ring *syncring.Ring, http *passthrough.Pool) *State {
	st := &State{Policy: r.Policy()}
	for _, e := range pool.Engines() {
		info := e.Info()
		st.Engines = append(st.Engines, EngineState{Addr: e.Addr, Kind: KindWire, ID: info.ID, State: e.State().String(),
			Models: info.Models, BlockSize: info.BlockSize, Inflight: r.Inflight(e), PeerLoad: r.PeerLoad(e), ReportedLoad: e.Load()})
	}
	if http != nil {
		for _, e := range http.Engines {
			state := "down"
			if e.Healthy() {
				state = "ready"
			}
			st.Engines = append(st.Engines, EngineState{Addr: e.URL, Kind: KindHTTP, State: state, Models: e.Models(),
				BlockSize: passthrough.BlockSize, Inflight: syncring.Load{PrefillTokens: e.InflightPrefill(), Requests: e.InflightRequests()}})
		}
	}
	is := index.Stats()
	st.Index = IndexState{Entries: is.Entries, Bytes: is.Bytes, EventsApplied: is.EventsApplied}
	for _, es := range is.Engines {
		ie := IndexEngine{Engine: es.Engine, Rank: es.Rank, Slot: es.Slot, ApproxBlocks: es.Blocks[kvstore.TierApprox],
			Precise: es.Precise, Entries: es.Entries, Bytes: es.Bytes}
		copy(ie.Blocks[:], es.Blocks[:kvstore.NumTiers])
		for t := range kvstore.NumTiers {
			if d, err := index.Digest(es.Slot, kvstore.Tier(t)); err == nil {
				for _, sum := range d.Sum {
					ie.HashSums[t] += sum
				}
			}
		}
		st.Index.Engines = append(st.Index.Engines, ie)
	}
	if ring != nil {
		rs := ring.Stats()
		st.Ring = &rs
	}
	return st
}
