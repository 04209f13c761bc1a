package sim

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Server serves the kvgate wire protocol as a simulated engine. It accepts
// any number of router connections; every router receives every KV event
// and LOAD report, and each GENERATE runs on one rank.
//
// Locks: Server.mu guards conns and draining; each rank's mu guards its Core
// and snapshot queue; conn.mu guards that connection's stream table. A
// goroutine holds at most one of them at a time, except rank.mu then
// conn.mu when a finished request leaves its connection's table.
type Server struct {
	cfg   Config
	log   *slog.Logger
	ranks []*rank

	mu       sync.Mutex
	conns    map[uint64]*conn
	raw      map[net.Conn]struct{} // every accepted socket until its goroutine ends
	nextConn uint64
	draining bool
	lns      []net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type conn struct {
	id uint64
	wc *wire.Conn

	mu      sync.Mutex
	streams map[uint32]int // open stream -> rank
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
	s := &Server{cfg: cfg, log: cfg.Logger.With("engine", cfg.ID), conns: make(map[uint64]*conn), raw: make(map[net.Conn]struct{}), ctx: ctx, cancel: cancel}
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
	if cfg.LoadInterval > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.reportLoad(ctx) }()
	}
	return s, nil
}

// Serve accepts connections on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return errors.New("sim: server is shutting down")
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || s.isDraining() {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveConn(nc) }()
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// handshake describes the engine to routers.
func (s *Server) handshake() wire.Handshake {
	rc := &s.cfg.Rank
	h := wire.Handshake{
		Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained, ID: s.cfg.ID,
		Features:  wire.FeatureSnapshot | wire.FeatureLoadRequest | wire.FeatureMultimodal | wire.FeatureS2 | wire.FeatureZstd,
		BlockSize: uint32(rc.BlockSize), MaxBatchedTokens: uint32(rc.MaxBatchedTokens), HashSeed: rc.HashSeed,
		DPRanks: uint16(s.cfg.DPRanks), Models: []string{rc.Model}, LoRAs: s.cfg.LoRAs,
		Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: uint64(rc.GPUBlocks)}},
	}
	if rc.CPUBlocks > 0 {
		h.Tiers = append(h.Tiers, wire.TierCapacity{Tier: wire.TierCPU, Blocks: uint64(rc.CPUBlocks)})
	}
	return h
}

func (s *Server) serveConn(nc net.Conn) {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.raw[nc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.raw, nc)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(s.ctx, wire.DefaultHandshakeTimeout)
	wc, err := wire.Server(ctx, nc, &wire.HandshakeConfig{Local: s.handshake(), Secret: s.cfg.Secret}, &s.cfg.Limits)
	cancel()
	if err != nil {
		s.log.Warn("router refused", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	c := &conn{wc: wc, streams: make(map[uint32]int)}
	s.mu.Lock()
	s.nextConn++
	c.id = s.nextConn
	s.conns[c.id] = c
	draining := s.draining
	s.mu.Unlock()
	if draining { // joined while Shutdown was telling everyone else
		_ = wc.Send(0, s.goaway())
	}
	s.log.Info("router connected", "router", wc.Peer.ID, "remote", nc.RemoteAddr().String())
	defer s.dropConn(c)
	for {
		f, err := wc.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("reading from router", "router", wc.Peer.ID, "err", err)
				_ = wc.SendError(0, wire.CodeOf(err), err.Error())
			}
			return
		}
		if err := s.handleFrame(c, f); err != nil {
			s.log.Warn("closing router connection", "router", wc.Peer.ID, "err", err)
			_ = wc.SendError(0, wire.CodeOf(err), err.Error())
			return
		}
	}
}

// dropConn forgets a connection and cancels its requests: nobody is left
// to read their tokens.
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	c.mu.Lock()
	open := make(map[uint32]int, len(c.streams))
	for st, r := range c.streams {
		open[st] = r
	}
	c.mu.Unlock()
	for st, r := range open {
		rk := s.ranks[r]
		rk.mu.Lock()
		rk.core.Cancel(RequestKey{Conn: c.id, Stream: st})
		rk.mu.Unlock()
	}
	c.wc.Close()
}

// handleFrame acts on one frame; an error closes the connection.
func (s *Server) handleFrame(c *conn, f wire.Frame) error {
	lim := &s.cfg.Limits
	switch f.Type {
	case wire.TypeGenerate:
		var g wire.Generate
		if err := wire.DecodeFrame(f, &g, lim); err != nil {
			return err
		}
		if f.Stream == 0 {
			return errors.New("GENERATE on stream 0: " + wire.ErrUnexpectedFrame.Error())
		}
		s.generate(c, f.Stream, &g)
	case wire.TypeCancel:
		var m wire.Cancel
		if err := wire.DecodeFrame(f, &m, lim); err != nil {
			return err
		}
		s.cancelStream(c, f.Stream)
	case wire.TypePing:
		var p wire.Ping
		if err := wire.DecodeFrame(f, &p, lim); err != nil {
			return err
		}
		return c.wc.Send(0, &wire.Pong{Data: p.Data})
	case wire.TypePong:
	case wire.TypeLoadRequest:
		for _, rk := range s.ranks {
			l := rk.load()
			if err := c.wc.Queue(0, &l); err != nil {
				return err
			}
		}
		return c.wc.Flush()
	case wire.TypeSnapshotRequest:
		var m wire.SnapshotRequest
		if err := wire.DecodeFrame(f, &m, lim); err != nil {
			return err
		}
		for _, rk := range s.ranks {
			rk.requestSnapshot(c, m.SnapshotID)
		}
	case wire.TypeGoaway:
		s.log.Info("router going away", "router", c.wc.Peer.ID)
	case wire.TypeError:
		var e wire.Error
		if err := wire.DecodeFrame(f, &e, lim); err != nil {
			return err
		}
		if f.Stream == 0 {
			return e.AsError(0)
		}
	default:
		return errors.New(f.Type.String() + " from a router: " + wire.ErrUnexpectedFrame.Error())
	}
	return nil
}

func (s *Server) generate(c *conn, stream uint32, g *wire.Generate) {
	fail := func(code wire.ErrorCode, msg string) { _ = c.wc.SendError(stream, code, msg) }
	if s.isDraining() {
		fail(wire.CodeOverloaded, "engine is draining")
		return
	}
	if string(g.Model) != s.cfg.Rank.Model {
		fail(wire.CodeUnknownModel, "model "+string(g.Model)+" is not served here")
		return
	}
	if g.LoRAID != 0 && !s.hasLoRA(g.LoRAID) {
		fail(wire.CodeUnknownLoRA, "LoRA adapter not loaded")
		return
	}
	r := s.pickRank(g.DPRank)
	if r < 0 {
		fail(wire.CodeBadRequest, "no such data-parallel rank")
		return
	}
	req := NewRequest(RequestKey{Conn: c.id, Stream: stream}, g.Prompt.AppendTo(nil), Params{
		MaxTokens: int(g.MaxTokens), IgnoreEOS: g.Flags&wire.GenIgnoreEOS != 0, StopTokens: g.StopTokens.AppendTo(nil),
		Seed: g.Seed, HasSeed: g.Flags&wire.GenHasSeed != 0, RequestID: string(g.RequestID),
	}, keysOf(g))
	c.mu.Lock()
	if _, open := c.streams[stream]; open {
		c.mu.Unlock()
		fail(wire.CodeDuplicate, "stream is open")
		return
	}
	c.streams[stream] = r
	c.mu.Unlock()
	rk := s.ranks[r]
	rk.mu.Lock()
	err := rk.core.Add(req)
	rk.mu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.streams, stream)
		c.mu.Unlock()
		fail(wire.CodeBadRequest, err.Error())
		return
	}
	rk.poke()
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

func (s *Server) cancelStream(c *conn, stream uint32) {
	c.mu.Lock()
	r, open := c.streams[stream]
	c.mu.Unlock()
	if !open {
		return // finished already: CANCEL raced with the last frame
	}
	rk := s.ranks[r]
	rk.mu.Lock()
	out, ok := rk.core.Cancel(RequestKey{Conn: c.id, Stream: stream})
	rk.mu.Unlock()
	if ok {
		s.deliver([]Output{out})
	}
}

// deliver sends outputs to their connections as TOKENS frames, one flush
// per connection.
func (s *Server) deliver(outs []Output) {
	touched := make(map[*conn]bool)
	for i := range outs {
		o := &outs[i]
		c := s.conn(o.Key.Conn)
		if c == nil {
			continue
		}
		m := wire.TokensMsg{}
		var tok [1]uint32
		if o.HasToken {
			tok[0] = o.Token
			m.Tokens = wire.TokensOf(tok[:])
		}
		if o.First {
			m.Flags |= wire.TokFirst
			m.CachedTokens = uint32(o.Cached)
		}
		if o.Finish != wire.FinishNone {
			m.Flags |= wire.TokLast
			m.Finish = o.Finish
			m.PromptTokens, m.CompletionTokens = uint32(o.PromptTokens), uint32(o.CompletionTokens)
			c.mu.Lock()
			delete(c.streams, o.Key.Stream)
			c.mu.Unlock()
		}
		if err := c.wc.Queue(o.Key.Stream, &m); err == nil {
			touched[c] = true
		}
	}
	for c := range touched {
		_ = c.wc.Flush()
	}
}

func (s *Server) conn(id uint64) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// broadcast sends m on stream 0 of every connection.
func (s *Server) broadcast(m wire.Message) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.wc.Send(0, m)
	}
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
				s.broadcast(&l)
			}
		}
	}
}

// Shutdown drains: it sends GOAWAY to every router, refuses new requests,
// lets running ones finish until ctx ends (or DrainTimeout), then closes.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	lns := s.lns
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	s.broadcast(s.goaway())
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.idle() {
		select {
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		case <-tick.C:
		}
	}
	s.Close()
	return nil
}

func (s *Server) goaway() *wire.Goaway {
	return &wire.Goaway{Code: wire.CodeShutdown, DrainMillis: uint32(s.cfg.DrainTimeout.Milliseconds()), Message: "engine shutting down"}
}

// idle reports whether no request runs and no handshake is under way (a
// router mid-handshake gets its GOAWAY when it completes).
func (s *Server) idle() bool {
	s.mu.Lock()
	handshaking := len(s.raw) > len(s.conns)
	s.mu.Unlock()
	if handshaking {
		return false
	}
	for _, rk := range s.ranks {
		rk.mu.Lock()
		idle := rk.core.Idle()
		rk.mu.Unlock()
		if !idle {
			return false
		}
	}
	return true
}

// Close stops everything at once.
func (s *Server) Close() {
	s.mu.Lock()
	s.draining = true
	for _, ln := range s.lns {
		ln.Close()
	}
	s.cancel()
	for nc := range s.raw { // handshaking or serving: every socket we hold
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
