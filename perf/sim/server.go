package sim

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Server serves the kvgate wire protocol as a simulated engine, on
// wire/serve: any number of routers connect, every router receives every
// KV event and LOAD report, and each GENERATE runs on one rank.
//
// Locks: Server.mu guards the request table; each rank's mu guards its Core
// and snapshot queue (and, on a free server, whether it is driven and its
// CANCELs' outputs); the outbox's mu its outputs. A goroutine holds at
// most one of them at a time. One writer goroutine sends every TOKENS
// frame (writeTokens), but for a free server's bursts, which their
// drivers write in the writer's turn (inline.go).
type Server struct {
	cfg   Config
	log   *slog.Logger
	ranks []*rank
	srv   *serve.Server

	mu   sync.Mutex
	open map[serve.Key]int // running request -> rank
	// parked are the prefill-side requests that may hand off (disagg_server.go).
	parked map[serve.Key]parkedReq
	// loras are the ranks' adapter slots (Config.MaxLoRAs > 0 only).
	loras []*rankLoRA
	// out carries the ranks' outputs to the writer (tokens.go).
	out *outbox
	// inline: the profile is free, so a request runs on the goroutine
	// that hands it over (inline.go).
	inline bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewServer starts the ranks of an engine; Serve then accepts routers.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: cfg.Logger.With("engine", cfg.ID), open: map[serve.Key]int{}, out: newOutbox(),
		inline: free(&cfg), ctx: ctx, cancel: cancel}
	s.srv = serve.New(serve.Config{Handshake: s.handshake(), Secret: cfg.Secret, Limits: cfg.Limits,
		DrainTimeout: cfg.DrainTimeout, HandshakeTimeout: cfg.HandshakeTimeout, MaxHandshakes: cfg.MaxHandshakes,
		Logger: s.log}, backend{s})
	for i := range cfg.DPRanks {
		core, err := NewCore(cfg.Rank)
		if err != nil {
			cancel()
			return nil, err
		}
		rk := &rank{id: i, core: core, srv: s, wake: make(chan struct{}, 1)}
		s.ranks = append(s.ranks, rk)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); rk.run(ctx) }()
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.writeTokens() }()
	s.initLoRA()
	if cfg.LoadInterval > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.reportLoad(ctx) }()
	}
	return s, nil
}

// Serve accepts router connections on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown drains: GOAWAY to every router, no new requests, running ones
// finish until ctx ends (or DrainTimeout); then everything closes.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	s.stopRanks()
	return err
}

// Close stops everything at once.
func (s *Server) Close() {
	s.srv.Close()
	s.stopRanks()
}

func (s *Server) stopRanks() {
	s.cancel()
	s.out.close()
	s.wg.Wait()
}

// handshake describes the engine to routers.
func (s *Server) handshake() wire.Handshake {
	rc := &s.cfg.Rank
	h := wire.Handshake{
		Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained, ID: s.cfg.ID,
		Features: wire.FeatureSnapshot | wire.FeatureLoadRequest | wire.FeatureMultimodal | wire.FeatureS2 | wire.FeatureZstd |
			wire.FeatureSampling | wire.FeatureTrace | wire.FeatureTokenBatch | rc.Disagg.Role.Features(),
		BlockSize: uint32(rc.BlockSize), MaxBatchedTokens: uint32(rc.MaxBatchedTokens), HashSeed: rc.HashSeed,
		DPRanks: uint16(s.cfg.DPRanks), Models: []string{rc.Model}, LoRAs: s.cfg.LoRAs,
		Tiers: rc.Capacities(), TierCosts: rc.TierCosts(), MaxModelLen: uint32(rc.MaxModelLen),
	}
	if s.cfg.NoKVEvents {
		h.Features &^= wire.FeatureSnapshot
	}
	if s.cfg.NoSampling {
		h.Features &^= wire.FeatureSampling
	}
	if s.cfg.NoMultimodal {
		h.Features &^= wire.FeatureMultimodal
	}
	if s.loraOn() {
		h.Features |= wire.FeatureAdapters
	}
	if h.Groups = rc.Groups(); h.Groups != nil { // hybrid.go
		h.Features |= wire.FeatureHybridGroups
	}
	return h
}

// backend is the simulator as wire/serve sees it.
type backend struct{ s *Server }

func (b backend) Generate(k serve.Key, g *wire.Generate) error {
	s := b.s
	if string(g.Model) != s.cfg.Rank.Model {
		return &serve.StreamError{Code: wire.CodeUnknownModel, Message: "model " + string(g.Model) + " is not served here"}
	}
	if g.LoRAID != 0 && !s.hasLoRA(g.LoRAID) {
		return &serve.StreamError{Code: wire.CodeUnknownLoRA, Message: "LoRA adapter not loaded"}
	}
	r := s.pickRank(g.DPRank)
	if r < 0 {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: "no such data-parallel rank"}
	}
	req := requestOf(k, g)
	var err error
	if req.handoff, err = s.handoffOf(k, g, req.tokens, s.ranks[r]); err != nil { // disagg_server.go
		return err
	}
	s.noteHandoff(k, req, g)
	if req.Params.Traceparent != "" {
		s.log.Debug("traced request", "request", string(g.RequestID), "traceparent", req.Params.Traceparent)
	}
	s.mu.Lock()
	s.open[k] = r
	s.mu.Unlock()
	if !s.admitLoRA(r, req) {
		return nil // it starts when its adapter is loaded
	}
	rk := s.ranks[r]
	rk.mu.Lock()
	err = rk.core.Add(req)
	rk.mu.Unlock()
	if err != nil {
		s.releaseLoRA(k)
		s.forgetHandoff(k)
		s.mu.Lock()
		delete(s.open, k)
		s.mu.Unlock()
		return err
	}
	if !s.inline {
		rk.poke() // else EndBatch drives it
	}
	return nil
}

// requestOf is the request of g, which it copies. Its Params leave
// RequestID empty: the id only seeds the sampler, and a string of it would
// be one more allocation a request.
func requestOf(k serve.Key, g *wire.Generate) *Request {
	prompt := g.Prompt.AppendTo(make([]uint32, 0, g.Prompt.Len()+answerRoom(int(g.MaxTokens))))
	p := Params{MaxTokens: int(g.MaxTokens), IgnoreEOS: g.Flags&wire.GenIgnoreEOS != 0, StopTokens: g.StopTokens.AppendTo(nil),
		Seed: g.Seed, HasSeed: g.Flags&wire.GenHasSeed != 0, Sampling: SamplingOf(g), Traceparent: traceparentOf(g)}
	seed := p.Seed
	if !p.HasSeed {
		seed = seedOf(g.RequestID, prompt)
	}
	return newRequest(RequestKey(k), prompt, seed, p, keysOf(g))
}

func (b backend) Cancel(k serve.Key) {
	s := b.s
	s.mu.Lock()
	r, ok := s.open[k]
	s.mu.Unlock()
	if !ok {
		return
	}
	rk := s.ranks[r]
	rk.mu.Lock()
	out, ok := rk.core.Cancel(RequestKey(k))
	if ok && s.inline {
		rk.late = append(rk.late, out) // EndBatch sends it, after the tokens of the steps before
	}
	rk.mu.Unlock()
	if ok && !s.inline {
		s.out.add([]Output{out}, false) // after the stream's tokens, never waiting: this is the read loop
	}
}

func (b backend) Load() []wire.Load {
	var out []wire.Load
	for _, rk := range b.s.ranks {
		out = append(out, rk.load())
	}
	return out
}

func (b backend) Snapshot(conn uint64, id uint32) {
	// Residency first: a router that reads ADAPTERS knows each rank's
	// adapters before it knows their cache (PROTOCOL.md 6.9).
	if b.s.loraOn() && b.s.srv.PeerFeatures(conn)&wire.FeatureAdapters != 0 {
		_ = b.s.srv.SendTo(conn, b.s.residentLoRA()...)
	}
	for _, rk := range b.s.ranks {
		rk.requestSnapshot(conn, id)
	}
}

func (b backend) Idle() bool {
	if !b.s.out.idle() {
		return false
	}
	for _, rk := range b.s.ranks {
		if !rk.idle() {
			return false
		}
	}
	return true
}

func (s *Server) hasLoRA(id uint32) bool {
	for _, l := range s.cfg.LoRAs {
		if l.ID == id {
			return true
		}
	}
	return false
}

// pickRank honours an explicit rank, else takes the least busy one.
func (s *Server) pickRank(want uint16) int {
	if want != wire.AnyRank {
		if int(want) >= len(s.ranks) {
			return -1
		}
		return int(want)
	}
	best, bestLoad := 0, -1
	for i, rk := range s.ranks {
		rk.mu.Lock()
		n := len(rk.core.waiting) + len(rk.core.running)
		rk.mu.Unlock()
		if bestLoad < 0 || n < bestLoad {
			best, bestLoad = i, n
		}
	}
	return best
}

// deliver queues a step's outputs for the writer (tokens.go's outbox);
// the rank waits while its writer is maxStepsAhead steps behind.
func (s *Server) deliver(outs []Output) { s.armHandoffs(outs); s.out.add(outs, true) }

// writeTokens sends the outputs the outbox holds until the server stops:
// to a router that batches, each stream's tokens of all the pending steps
// in one frame; to one that does not, each step's frames in a write of
// their own, as when steps were written as they finished.
func (s *Server) writeTokens() {
	var fb frameBuilder
	for {
		outs, ends, ok := s.out.take()
		if !ok {
			return
		}
		s.srv.Deliver(fb.frames(outs, s.batches, true))
		start := 0
		for _, end := range ends {
			if frames := fb.frames(outs[start:end], s.batches, false); len(frames) > 0 {
				s.srv.Deliver(frames)
			}
			start = end
		}
		s.finished(outs)
		s.out.sent(outs)
	}
}

// finished forgets the requests whose last outputs are among outs, now
// that they are sent.
func (s *Server) finished(outs []Output) {
	for i := range outs {
		if o := &outs[i]; o.Finish != wire.FinishNone {
			s.mu.Lock()
			delete(s.open, serve.Key(o.Key))
			s.mu.Unlock()
			s.releaseLoRA(serve.Key(o.Key))
			s.forgetHandoff(serve.Key(o.Key))
		}
	}
}

// batches reports whether the router on conn takes several steps' tokens
// in a frame (its HELLO set wire.FeatureTokenBatch; the WELCOME always does).
func (s *Server) batches(conn uint64) bool {
	return s.srv.PeerFeatures(conn)&wire.FeatureTokenBatch != 0
}

func (s *Server) reportLoad(ctx context.Context) {
	t := time.NewTicker(s.cfg.LoadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, rk := range s.ranks {
				l := rk.load()
				s.srv.Broadcast(&l)
			}
		}
	}
}
