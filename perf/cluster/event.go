package cluster

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// eventKind is what an event of the simulation does.
type eventKind uint8

// Event kinds.
const (
	evArrival      eventKind = iota // a request reaches its router
	evDeliver                       // a request reaches its engine
	evStepDone                      // an engine's step ends
	evIndex                         // an engine's KV events reach the routers
	evLoad                          // an engine reports LOAD
	evPeer                          // a LOAD report or a reservation reaches the other routers
	evAdapters                      // an engine's ADAPTERS frame reaches the routers
	evAdapterReady                  // a request's adapter is loaded: it starts
)

var eventKindNames = [...]string{"arrival", "deliver", "step-done", "index", "load", "peer", "adapters", "adapter-ready"}

// String returns the kind's name, for debugging a run.
func (k eventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event_%d", uint8(k))
}

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	eng  int
	req  int
	res  sim.StepResult
	evs  []kvstore.Event
	load wire.Load
	peer peerDelta
	// adapters is an evAdapters' frame.
	adapters *wire.Adapters
	// token is an evDeliverDecode's first token (handoff.go).
	token uint32
}

// peerDelta is a change of one router's load on an engine, reaching the
// other routers (router -1: a LOAD report, reaching every router).
type peerDelta struct {
	router int
	delta  syncring.Load
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any     { old := *q; e := old[len(old)-1]; *q = old[:len(old)-1]; return e }

// gpuOnly drops the events of lower tiers, in place.
func gpuOnly(evs []kvstore.Event) []kvstore.Event {
	out := evs[:0]
	for _, ev := range evs {
		if ev.Tier == kvstore.TierGPU {
			out = append(out, ev)
		}
	}
	return out
}

func (s *Sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.q, e)
}

func (s *Sim) handle(ev *event) {
	switch ev.kind {
	case evArrival:
		s.arrive(ev.req)
	case evDeliver:
		s.sending[ev.eng] -= float64(s.res[ev.req].prefill)
		core := s.runsOn(ev.eng)
		s.res[ev.req].core = core
		if s.admitAdapter(core, ev.req) {
			s.startOn(core, ev.req)
		}
	case evAdapterReady:
		s.startOn(ev.eng, ev.req)
	case evAdapters:
		for _, r := range s.routers {
			r.adapters[ev.eng].Apply(ev.adapters, s.now)
		}
	case evDeliverPrefill, evDeliverDecode, evCancelPrefill:
		s.handleSplit(ev) // handoff.go
	case evStepDone:
		s.stepDone(ev.eng, ev.res)
	case evIndex:
		evs := ev.evs
		if s.cfg.Policy == PolicyTierBlind {
			evs = gpuOnly(evs)
		}
		_ = s.index.Apply(s.slots[ev.eng], evs)
	case evLoad:
		l := s.engines[ev.eng].core.Load()
		s.push(&event{at: s.now + s.cfg.SyncDelay, kind: evPeer, eng: ev.eng, load: l, peer: peerDelta{router: -1}})
		if s.done < len(s.reqs) {
			s.push(&event{at: s.now + s.cfg.LoadPeriod, kind: evLoad, eng: ev.eng})
		}
	case evPeer:
		if ev.peer.router < 0 { // a LOAD report reaching every router
			at := s.reportPlace(ev.eng)
			for _, r := range s.routers {
				r.loads[at] = ev.load
				r.seqs[at]++
				r.loadAt[at] = s.now
			}
			return
		}
		for i, r := range s.routers {
			if i != ev.peer.router {
				r.peer[ev.eng] = addLoad(r.peer[ev.eng], ev.peer.delta)
			}
		}
	}
}

// startOn adds request i to core c's scheduler.
func (s *Sim) startOn(c, i int) {
	r := s.reqs[i]
	req := sim.NewRequest(sim.RequestKey{Stream: uint32(i)}, r.Prompt, sim.Params{MaxTokens: r.Output, IgnoreEOS: true},
		kvstore.Keys{LoRAID: r.LoRA})
	if err := s.engines[c].core.Add(req); err != nil {
		s.rec.Fail(err.Error())
		s.releaseAdapter(c, i)
		s.release(i)
		s.done++
		return
	}
	s.kick(c)
}
