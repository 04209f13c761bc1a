package sim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// transferParams are the simulator's kv_transfer bytes: what a prefill
// engine hands over, and a decode engine needs to take it. Real engines
// put their own there (vLLM: remote_engine_id, remote_block_ids...).
type transferParams struct {
	Engine  string  `json:"engine"`  // the prefill engine's handshake id
	Request string  `json:"request"` // its request id
	Blocks  int     `json:"blocks"`  // full prompt blocks it holds
	Bytes   float64 `json:"bytes"`   // their KV size (the model profile's bytes per token)
}

// handoffOf checks g against the engine's role and returns the request's
// hand-off state, nil for an ordinary request. Errors are BAD_REQUEST
// naming what is refused, or STREAM_FAILED for a transfer that cannot
// arrive within the decode side's deadline.
func (s *Server) handoffOf(k serve.Key, g *wire.Generate, prompt []uint32, rk *rank) (*handoff, error) {
	role := s.cfg.Rank.Disagg.Role
	bad := func(format string, a ...any) error {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: fmt.Sprintf(format, a...)}
	}
	if g.Flags&wire.GenHandoff == 0 {
		if role == wire.RolePrefill {
			return nil, bad("a prefill-only engine takes only prefill-side hand-offs (GENERATE.handoff)")
		}
		return nil, nil
	}
	h := &g.Handoff
	switch {
	case role == wire.RoleBoth:
		return nil, bad("handoff: this engine serves no hand-off (role both, no DISAGG)")
	case s.srv.PeerFeatures(k.Conn)&wire.FeatureDisagg == 0:
		return nil, bad("handoff: the router's HELLO did not announce DISAGG")
	case h.Side == wire.HandoffPrefill && role != wire.RolePrefill:
		return nil, bad("handoff: a decode-only engine takes no prefill side")
	case h.Side == wire.HandoffPrefill:
		bs := s.cfg.Rank.BlockSize
		blocks := len(prompt) / bs
		p, err := json.Marshal(transferParams{Engine: s.cfg.ID, Request: string(g.RequestID), Blocks: blocks,
			Bytes: float64(blocks) * s.cfg.Rank.blockBytes()})
		if err != nil {
			return nil, err
		}
		return &handoff{side: wire.HandoffPrefill, params: p}, nil
	}
	var p transferParams
	if err := json.Unmarshal(g.KVTransfer, &p); err != nil {
		return nil, bad("kv_transfer: not this simulator's parameters: %v", err)
	}
	if p.Engine != string(h.Peer) || p.Blocks < 0 {
		return nil, bad("kv_transfer: engine %q, %d blocks, for hand-off peer %q", p.Engine, p.Blocks, h.Peer)
	}
	keys := keysOf(g)
	rk.mu.Lock()
	missing := p.Blocks - rk.core.CachedBlocks(prompt, &keys)
	t := rk.core.TransferTime(missing)
	rk.mu.Unlock()
	if wall, limit := s.wall(t), time.Duration(h.DeadlineMillis)*time.Millisecond; wall > limit {
		return nil, &serve.StreamError{Code: wire.CodeStreamFailed,
			Message: fmt.Sprintf("kv transfer of %d blocks from %s takes %v, over the hand-off deadline %v", missing, p.Engine, wall, limit)}
	}
	return &handoff{side: wire.HandoffDecode, blocks: p.Blocks}, nil
}

// wall is simulated duration d in real time.
func (s *Server) wall(d time.Duration) time.Duration { return time.Duration(float64(d) / s.cfg.Speed) }

// armHandoffs starts, for each hand-off among a step's outputs, the timer
// that frees the parked request when the router has not released it by
// its GENERATE's deadline_ms.
func (s *Server) armHandoffs(outs []Output) {
	for i := range outs {
		if outs[i].Handoff == nil {
			continue
		}
		s.mu.Lock()
		p := s.parked[serve.Key(outs[i].Key)]
		rk := s.ranks[s.open[serve.Key(outs[i].Key)]]
		s.mu.Unlock()
		if p.req == nil {
			continue
		}
		time.AfterFunc(p.keep, func() {
			rk.mu.Lock()
			out, ok := rk.core.Expire(p.req)
			rk.mu.Unlock()
			if ok {
				s.out.add([]Output{out}, false)
			}
		})
	}
}

// parkedReq is a prefill-side request the server may have to expire.
type parkedReq struct {
	req  *Request
	keep time.Duration
}

// noteHandoff records a prefill-side request for armHandoffs.
func (s *Server) noteHandoff(k serve.Key, req *Request, g *wire.Generate) {
	if req.handoff == nil || req.handoff.side != wire.HandoffPrefill {
		return
	}
	s.mu.Lock()
	if s.parked == nil {
		s.parked = map[serve.Key]parkedReq{}
	}
	s.parked[k] = parkedReq{req: req, keep: time.Duration(g.Handoff.DeadlineMillis) * time.Millisecond}
	s.mu.Unlock()
}

// forgetHandoff drops the record of a stream that ended.
func (s *Server) forgetHandoff(k serve.Key) {
	s.mu.Lock()
	delete(s.parked, k)
	s.mu.Unlock()
}
