package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// run keeps the engine connected until ctx ends.
func (e *Engine) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		e.state.Store(int32(StateConnecting))
		err := e.session(ctx)
		e.state.Store(int32(StateDown))
		e.failStreams(err)
		e.purge()
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("engine connection lost", "engine", e.Addr, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff/2)+1))):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session connects once and serves the connection until it fails.
func (e *Engine) session(ctx context.Context) error {
	nc, err := netpoll.DialConnection("tcp", e.Addr, e.pool.cfg.DialTimeout)
	if err != nil {
		return fmt.Errorf("dialing: %w", err)
	}
	// netpoll takes a write timeout at the start of each write, so this
	// one applies to every write (a read deadline set while the read loop
	// already waits would not: the watcher times reads instead).
	_ = nc.SetWriteTimeout(e.pool.cfg.WriteTimeout)
	// wire.Client honours only its context's deadline; closing the socket
	// when the pool closes (or the deadline passes) ends a handshake that
	// an engine holds open.
	hctx, cancel := context.WithTimeout(ctx, e.pool.cfg.DialTimeout)
	closeOnDone := context.AfterFunc(hctx, func() { _ = nc.Close() })
	b := &sinkBatch{poll: nc.Reader()} // the streams whose sinks take the frames read (sink.go)
	c, err := wire.Client(hctx, &batchConn{Connection: nc, b: b}, &wire.HandshakeConfig{Secret: e.pool.cfg.Secret,
		Local: wire.Handshake{Role: wire.RoleRouter, ID: e.pool.cfg.RouterID, Features: e.pool.helloFeatures()},
		Check: e.pool.checkEngine}, &e.pool.cfg.Limits)
	if !closeOnDone() && err == nil {
		err = fmt.Errorf("handshake: %w", hctx.Err()) // the socket was closed under it
	}
	cancel()
	if err != nil {
		nc.Close()
		return err
	}
	defer c.Close()
	if err := e.adopt(c); err != nil {
		_ = c.SendError(0, wire.CodeHashScheme, err.Error())
		return err
	}
	// Pool.Close, Pool.Remove and Pool.Drain end the session by ctx: the
	// read loop may be waiting for a frame.
	defer context.AfterFunc(ctx, func() { _ = c.Close() })()
	info := &e.profile().info
	e.pool.membershipChanged() // the engine's id is known now
	if other := e.pool.sameID(e); other != nil {
		e.log.Warn("two engine addresses answer with one id: one engine listed twice? the ring counts it once",
			"engine", e.Addr, "other", other.Addr, "id", info.ID)
	}
	// A new engine takes requests once its snapshot is in the index
	// (admit), or after SnapshotWait without one (the watcher).
	admitBy := time.Time{}
	e.snapAwait = 0
	if info.Features&wire.FeatureSnapshot != 0 {
		e.snapAwait, admitBy = max(int(info.DPRanks), 1), time.Now().Add(e.pool.cfg.SnapshotWait)
		if err := c.Send(0, &wire.SnapshotRequest{SnapshotID: 1}); err != nil {
			return err
		}
	} else {
		e.state.Store(int32(StateReady))
	}
	e.log.Info("engine connected", "engine", e.Addr, "id", info.ID, "models", info.Models,
		"block_size", info.BlockSize, "dp_ranks", info.DPRanks)
	stop, silent, watched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var heard atomic.Uint64
	go func() { defer close(watched); e.watch(c, stop, &heard, silent, admitBy) }()
	defer func() { // the watcher never outlives its session: it changes the engine's state
		close(stop)
		_ = c.Close() // a write it has under way fails now
		<-watched
	}()
	err = e.readLoop(ctx, c, b, &heard)
	select {
	case <-silent:
		return fmt.Errorf("%w (%v)", ErrSilent, err)
	default:
	}
	if violation(err) {
		// PROTOCOL.md section 8: say why before closing, so the engine can
		// log it.
		_ = c.SendError(0, wire.CodeOf(err), err.Error())
	}
	return err
}

// violation reports whether err is the engine breaking the protocol (as
// opposed to the connection failing or the engine sending ERROR).
func violation(err error) bool {
	for _, v := range []error{wire.ErrFrameTooLarge, wire.ErrTruncated, wire.ErrTrailingBytes, wire.ErrUnknownType,
		wire.ErrBadHeader, wire.ErrBadValue, wire.ErrLimit, wire.ErrDecompress, wire.ErrUnexpectedFrame} {
		if errors.Is(err, v) {
			return true
		}
	}
	return false
}

// adopt records a new connection's handshake and registers its ranks in the
// index (again after a reconnect: the snapshot replaces what it held).
func (e *Engine) adopt(c *wire.Conn) error {
	h, err := e.pool.hasher(kvstore.HashConfig{BlockSize: int(c.Peer.BlockSize), Seed: c.Peer.HashSeed, Model: firstModel(c.Peer.Models)})
	if err != nil {
		return err
	}
	ranks := max(int(c.Peer.DPRanks), 1)
	groups, err := e.pool.indexGroups(&c.Peer)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.conn = c
	e.adapters.reset()
	e.streams.Store(newStreamTable(streamTableMin))
	e.lastSeq = make([]uint64, ranks)
	e.snapshots = make(map[uint16][]kvstore.Event)
	slots := e.profile().slots
	if len(slots) != ranks || !slices.Equal(groups, e.profile().groups) {
		if len(slots) > 0 {
			_ = e.pool.index.RemoveEngine(e.Addr)
		}
		var caps [kvstore.NumTiers]uint64
		for t := range kvstore.NumTiers {
			caps[t] = c.Peer.Capacity(wire.Tier(t))
		}
		if slots, err = e.pool.index.AddEngine(kvstore.EngineConfig{ID: e.Addr, Ranks: ranks, Capacity: caps, Groups: groups}); err != nil {
			return err
		}
	}
	e.prof.Store(newProfile(c.Peer, h, slots, groups))
	return nil
}

func firstModel(ms []string) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0]
}

// readLoop dispatches frames until the connection fails; b batches the
// frames for streams' sinks (sink.go). heard counts,
// for the watcher, each frame read and each frame handled: odd while one
// is being handled (applying a large snapshot can take a while, and the
// engine is not silent meanwhile); a TOKENS frame, handled without a
// wait, adds both at once.
func (e *Engine) readLoop(ctx context.Context, c frameConn, b *sinkBatch, heard *atomic.Uint64) error {
	lim := &e.pool.cfg.Limits
	var tok wire.TokensMsg
	var evs wire.KVEvents
	for ctx.Err() == nil {
		f, err := c.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type == wire.TypeTokens { // most frames: handled at once, so counted once
			if err := wire.DecodeFrame(f, &tok, lim); err != nil {
				return err
			}
			e.deliverTokens(f.Stream, &tok, b)
			heard.Add(2)
			continue
		}
		heard.Add(1) // odd while the frame is handled: a long snapshot is not silence
		if f.Stream != 0 && controlFrame(f.Type) {
			return fmt.Errorf("%s on stream %d: %w", f.Type, f.Stream, wire.ErrUnexpectedFrame)
		}
		if f.Type == wire.TypeSnapshot || f.Type == wire.TypePing {
			b.flush() // this frame may take a while (a snapshot, a PONG's write): the tokens go out first
		}
		switch f.Type {
		case wire.TypeError:
			var m wire.Error
			if err := wire.DecodeFrame(f, &m, lim); err != nil {
				return err
			}
			if f.Stream == 0 {
				return m.AsError(0)
			}
			e.endStream(f.Stream, m.AsError(f.Stream))
		case wire.TypeKVEvents:
			if err := wire.DecodeFrame(f, &evs, lim); err != nil {
				return err
			}
			e.applyEvents(&evs)
		case wire.TypeSnapshot:
			var m wire.Snapshot
			if err := wire.DecodeFrame(f, &m, lim); err != nil {
				return err
			}
			e.applySnapshot(&m)
		case wire.TypeLoad:
			var m wire.Load
			if err := wire.DecodeFrame(f, &m, lim); err != nil {
				return err
			}
			r := &loadReport{m: m, seq: 1, at: time.Now()}
			if old := e.load.Load(); old != nil {
				r.seq = old.seq + 1
			}
			e.load.Store(r)
		case wire.TypeAdapters:
			var m wire.Adapters
			if err := wire.DecodeFrame(f, &m, lim); err != nil {
				return err
			}
			e.adapters.apply(&m, AdapterNow())
		case wire.TypePing:
			var p wire.Ping
			if err := wire.DecodeFrame(f, &p, lim); err != nil {
				return err
			}
			_ = c.Send(0, &wire.Pong{Data: p.Data})
		case wire.TypePong: // counted in heard
		case wire.TypeGoaway:
			e.state.Store(int32(StateDraining))
			e.log.Info("engine draining (GOAWAY)", "engine", e.Addr)
		default:
			return fmt.Errorf("%s from an engine: %w", f.Type, wire.ErrUnexpectedFrame)
		}
		heard.Add(1)
	}
	return ctx.Err()
}

// frameConn is what the read loop needs of its connection: a *wire.Conn,
// or a benchmark's frames (BenchmarkReadLoopTokens).
type frameConn interface {
	ReadFrame() (wire.Frame, error)
	Send(stream uint32, m wire.Message) error
}

// controlFrame reports whether frames of type t belong on stream 0 only.
func controlFrame(t wire.Type) bool {
	switch t {
	case wire.TypeKVEvents, wire.TypeSnapshot, wire.TypeLoad, wire.TypePing, wire.TypePong, wire.TypeGoaway, wire.TypeAdapters:
		return true
	}
	return false
}
