package admin

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
)

// Status is the status page's document (GET /status.json): the engines
// with their cached blocks and load, the ring and its peers, and the
// last minutes of samples. It is /debug/state made small enough to poll.
type Status struct {
	// Now is when the document was made, Unix milliseconds.
	Now     int64           `json:"now"`
	Policy  string          `json:"policy"`
	Engines []StatusEngine  `json:"engines"`
	Ring    *syncring.Stats `json:"ring,omitempty"`
	// Samples are the kept history, oldest first, taken every
	// SampleEveryMs; SamplesTaken counts every sample since start.
	Samples       []Sample `json:"samples"`
	SamplesTaken  uint64   `json:"samples_taken"`
	SampleEveryMs int64    `json:"sample_every_ms"`
}

// StatusEngine is one engine in Status.
type StatusEngine struct {
	Addr  string `json:"addr"`
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	// Blocks are the blocks the index holds for the engine per tier (GPU,
	// CPU, disk), over its ranks; ApproxBlocks the routing guesses apart.
	Blocks       [kvstore.NumTiers]uint64 `json:"blocks"`
	ApproxBlocks uint64                   `json:"approx_blocks"`
	// Inflight is this replica's load on the engine, PeerLoad the other
	// replicas'.
	Inflight syncring.Load `json:"inflight"`
	PeerLoad syncring.Load `json:"peer_load"`
	// Running and Waiting are from the engine's last LOAD report (-1
	// before one, and for HTTP engines).
	Running int64 `json:"running"`
	Waiting int64 `json:"waiting"`
	// PromptTokens and CachedTokens are since start (Tokens); HitRate is
	// their ratio, -1 before any request.
	PromptTokens float64 `json:"prompt_tokens"`
	CachedTokens float64 `json:"cached_tokens"`
	HitRate      float64 `json:"hit_rate"`
}

// StatusSource is what the status page reads: the daemon's state
// (Snapshot) and the registry holding the gateway's per-engine token
// counters (nil: no hit rates).
type StatusSource struct {
	State   func() *State
	Metrics prometheus.Gatherer
}

// statusOf condenses a state and the history into the page's document.
func statusOf(st *State, tokens map[string]Tokens, h *History, every time.Duration, now time.Time) *Status {
	out := &Status{Now: now.UnixMilli(), Policy: string(st.Policy), Ring: st.Ring, Engines: []StatusEngine{},
		SampleEveryMs: every.Milliseconds()}
	out.Samples, out.SamplesTaken = h.Samples()
	for _, e := range st.Engines {
		se := StatusEngine{Addr: e.Addr, ID: e.ID, Kind: e.Kind, State: e.State, Inflight: e.Inflight, PeerLoad: e.PeerLoad,
			Running: -1, Waiting: -1}
		t := tokens[e.Addr]
		se.PromptTokens, se.CachedTokens, se.HitRate = t.Prompt, t.Cached, t.HitRate()
		if l := e.ReportedLoad; l != nil {
			se.Running, se.Waiting = int64(l.Running), int64(l.Waiting)
		}
		for _, ie := range st.Index.Engines {
			if ie.Engine != e.Addr {
				continue
			}
			for t := range se.Blocks {
				se.Blocks[t] += ie.Blocks[t]
			}
			se.ApproxBlocks += ie.ApproxBlocks
		}
		out.Engines = append(out.Engines, se)
	}
	return out
}

//go:embed status.html
var statusPage []byte

// MountStatus serves the status page at GET /status (one HTML file, its
// script and style inline: nothing is fetched from elsewhere) and the
// document it polls at GET /status.json, read from src; h is the history
// a Record goroutine fills every every.
func (s *Server) MountStatus(src StatusSource, h *History, every time.Duration) {
	s.mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		_, _ = w.Write(statusPage)
	})
	s.mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, statusOf(src.State(), TokenCounts(src.Metrics), h, every, time.Now()))
	})
}
