package sim

import (
	"sync"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// rankLoRA is a server rank's adapter slots (Config.MaxLoRAs), the
// requests waiting for a slot, and which request holds which adapter. Its
// mu is taken alone, never with the rank's or the server's.
type rankLoRA struct {
	mu      sync.Mutex
	slots   *LoRASlots
	start   time.Time // the slots' clock is time since start
	waiting []*Request
	held    map[serve.Key]uint32
}

// loraOn reports whether the server models adapter slots.
func (s *Server) loraOn() bool { return s.cfg.MaxLoRAs > 0 }

// initLoRA makes each rank's slots.
func (s *Server) initLoRA() {
	if !s.loraOn() {
		return
	}
	load := s.cfg.LoRALoadTime
	if load <= 0 {
		load = DefaultLoRALoadTime
	}
	for range s.ranks {
		s.loras = append(s.loras, &rankLoRA{slots: NewLoRASlots(s.cfg.MaxLoRAs, load), start: time.Now(), held: map[serve.Key]uint32{}})
	}
}

// admitLoRA holds req's adapter on rank r. It reports whether req may
// start now; otherwise it starts when the adapter's load completes (the
// load's time divided by Speed, then ADAPTERS LOADED to the routers) or,
// with every slot held, when a request of the rank ends.
func (s *Server) admitLoRA(r int, req *Request) bool {
	id := req.Keys.LoRAID
	if !s.loraOn() || id == 0 {
		return true
	}
	rl := s.loras[r]
	rl.mu.Lock()
	now := time.Duration(float64(time.Since(rl.start)) * s.cfg.Speed) // in simulated time
	ready, loaded, evicted, err := rl.slots.Acquire(id, now)
	if err != nil {
		rl.waiting = append(rl.waiting, req)
		rl.mu.Unlock()
		return false
	}
	rl.held[serve.Key(req.Key)] = id
	loadTime := rl.slots.LoadTime()
	rl.mu.Unlock()
	if evicted != 0 {
		s.announceLoRA(r, wire.AdaptersEvicted, 0, evicted)
	}
	if ready <= now {
		return true
	}
	time.AfterFunc(time.Duration(float64(ready-now)/s.cfg.Speed), func() {
		if loaded {
			s.announceLoRA(r, wire.AdaptersLoaded, uint64(loadTime), id)
		}
		s.startOn(r, req)
	})
	return false
}

// releaseLoRA ends request k's hold on its adapter and lets in the
// requests that waited for a slot of its rank.
func (s *Server) releaseLoRA(k serve.Key) {
	for r, rl := range s.loras {
		rl.mu.Lock()
		_, ok := rl.held[k]
		if !ok {
			rl.mu.Unlock()
			continue
		}
		rl.slots.Release(rl.held[k])
		delete(rl.held, k)
		waiting := rl.waiting
		rl.waiting = nil
		rl.mu.Unlock()
		for _, req := range waiting {
			if s.admitLoRA(r, req) {
				s.startOn(r, req)
			}
		}
		return
	}
}

// startOn adds req to rank r's scheduler (a request whose adapter became
// ready); a request refused now ends with an ERROR.
func (s *Server) startOn(r int, req *Request) {
	rk := s.ranks[r]
	rk.mu.Lock()
	err := rk.core.Add(req)
	rk.mu.Unlock()
	if err != nil {
		s.mu.Lock()
		delete(s.open, serve.Key(req.Key))
		s.mu.Unlock()
		s.releaseLoRA(serve.Key(req.Key))
		s.srv.Fail(serve.Key(req.Key), wire.CodeOverloaded, err.Error())
		return
	}
	rk.poke()
}

// loraName is adapter id's name from the configured list.
func (s *Server) loraName(id uint32) string {
	for _, l := range s.cfg.LoRAs {
		if l.ID == id {
			return l.Name
		}
	}
	return ""
}

// announceLoRA sends rank r's ADAPTERS change to the routers that read it.
func (s *Server) announceLoRA(r int, change wire.AdapterChange, loadNs uint64, id uint32) {
	s.srv.BroadcastIf(wire.FeatureAdapters, &wire.Adapters{DPRank: uint16(r), Change: change, Slots: uint16(s.cfg.MaxLoRAs),
		LoadNanos: loadNs, LoRAs: []wire.LoRA{{ID: id, Name: s.loraName(id)}}})
}

// residentLoRA is each rank's ADAPTERS RESIDENT frame (none without slots).
func (s *Server) residentLoRA() []wire.Message {
	var out []wire.Message
	for r, rl := range s.loras {
		rl.mu.Lock()
		ids := rl.slots.IDs(nil)
		rl.mu.Unlock()
		m := &wire.Adapters{DPRank: uint16(r), Change: wire.AdaptersResident, Slots: uint16(s.cfg.MaxLoRAs)}
		for _, id := range ids {
			m.LoRAs = append(m.LoRAs, wire.LoRA{ID: id, Name: s.loraName(id)})
		}
		out = append(out, m)
	}
	return out
}
