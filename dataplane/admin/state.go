package admin

import (
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// State is the /debug/state document: the policy, each engine with its
// load as this replica, its peers and the engine itself see it, the index,
// and the ring when there is one.
type State struct {
	Policy  route.Policy    `json:"policy"`
	Engines []EngineState   `json:"engines"`
	Index   IndexState      `json:"index"`
	Ring    *syncring.Stats `json:"ring,omitempty"`
}

// EngineState is one engine in State.
type EngineState struct {
	Addr      string   `json:"addr"`
	ID        string   `json:"id"`
	State     string   `json:"state"`
	Models    []string `json:"models"`
	BlockSize uint32   `json:"block_size"`
	// Inflight is this replica's own load on the engine.
	Inflight syncring.Load `json:"inflight"`
	// PeerLoad is the other replicas' load, from the ring.
	PeerLoad syncring.Load `json:"peer_load"`
	// ReportedLoad is the engine's last LOAD report, nil before one.
	ReportedLoad *wire.Load `json:"reported_load"`
}

// IndexState is the KV index in State.
type IndexState struct {
	Entries       uint64                `json:"entries"`
	Bytes         uint64                `json:"bytes"`
	EventsApplied uint64                `json:"events_applied"`
	Engines       []kvstore.EngineStats `json:"engines"`
}

// Snapshot reads the state now; ring may be nil.
func Snapshot(pool *engine.Pool, r *route.Router, index *kvstore.Index, ring *syncring.Ring) *State {
	st := &State{Policy: r.Policy()}
	for _, e := range pool.Engines() {
		info := e.Info()
		st.Engines = append(st.Engines, EngineState{Addr: e.Addr, ID: info.ID, State: e.State().String(),
			Models: info.Models, BlockSize: info.BlockSize, Inflight: r.Inflight(e), PeerLoad: r.PeerLoad(e), ReportedLoad: e.Load()})
	}
	is := index.Stats()
	st.Index = IndexState{Entries: is.Entries, Bytes: is.Bytes, EventsApplied: is.EventsApplied, Engines: is.Engines}
	if ring != nil {
		rs := ring.Stats()
		st.Ring = &rs
	}
	return st
}
