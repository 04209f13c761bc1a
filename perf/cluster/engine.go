package cluster

import (
	"time"

	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

type engineState struct {
	core     *sim.Core
	stepping bool
	id       string
}

// kick starts a step on an idle engine with work.
func (s *Sim) kick(e int) {
	es := s.engines[e]
	if es.stepping || es.core.Idle() {
		return
	}
	res := es.core.Step()
	if res.Duration == 0 && len(res.Outputs) == 0 && s.isPrefill(e) {
		return // blocked on the KV of parked hand-offs: their cancel kicks it (handoff.go)
	}
	es.stepping = true
	s.push(&event{at: s.now + max(res.Duration, time.Microsecond), kind: evStepDone, eng: e, res: res})
}

func (s *Sim) stepDone(e int, res sim.StepResult) {
	s.engines[e].stepping = false
	if len(res.Events) > 0 {
		s.push(&event{at: s.now + s.cfg.SyncDelay, kind: evIndex, eng: e, evs: res.Events})
	}
	for _, o := range res.Outputs {
		if s.disaggOn() && s.prefillOutput(e, &o) { // handoff.go
			continue
		}
		i := int(o.Key.Stream)
		rv := s.res[i]
		if sp := s.splits[i]; sp != nil && sp.onDecode && o.First {
			s.decodeFirst(i, &o) // the second token, after the hand-off
		} else if o.First {
			rv.first, rv.cached, rv.firstAt, rv.lastToken = true, o.Cached, s.now, s.now
			s.routers[rv.router].pend[rv.engine].Started(rv.tag)
			s.reserve(rv.router, rv.engine, syncring.Load{PrefillTokens: -rv.prefill, DecodeTokens: int64(rv.prompt)})
			rv.decode = int64(rv.prompt)
		} else if o.HasToken {
			rv.gaps = append(rv.gaps, s.now-rv.lastToken)
			rv.lastToken = s.now
		}
		if o.HasToken {
			s.reserve(rv.router, rv.engine, syncring.Load{DecodeTokens: 1})
			rv.decode++
		}
		if o.Finish != wire.FinishNone {
			prompt, completion := o.PromptTokens, o.CompletionTokens
			if rv.prompt > len(s.reqs[i].Prompt) { // a split's decode side: its prompt holds the first token
				prompt, completion = prompt-1, completion+1
			}
			s.finishRequest(s.engines[e].id, rv, prompt, completion)
			s.release(i)
			s.releaseAdapter(e, i)
			s.done++
		}
	}
	s.kick(e)
}
