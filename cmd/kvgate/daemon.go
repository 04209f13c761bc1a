package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvgate/kvgate/dataplane"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/syncring"
)

// daemon is a running kvgate.
type daemon struct {
	log    *slog.Logger
	sims   []*sim.Server
	pool   *engine.Pool
	ring   *syncring.Ring
	steer  *passthrough.Pool
	http   *httpx.Server
	admin  *http.Server
	served chan error
	stop   context.CancelFunc
}

func start(c *config, log *slog.Logger) (*daemon, error) {
	d := &daemon{log: log, served: make(chan error, 1)}
	tok, err := loadTokenizer(c.tokenizerDir)
	if err != nil {
		return nil, err
	}
	if c.maxModelLen > 0 {
		tok.Config.ModelMaxLength = c.maxModelLen
	}
	checkLimits(log)
	addrs := c.engines
	if c.simEngines > 0 {
		if addrs, err = d.startSims(c); err != nil {
			return nil, err
		}
	}
	index := kvstore.New(kvstore.Options{})
	pcfg := engine.DefaultConfig()
	pcfg.Secret, pcfg.Logger = c.secret, log
	d.pool = engine.NewPool(pcfg, index, addrs)
	router := route.New(d.pool, c.policy, c.weights)
	if d.ring, err = startRing(&c.ring, d.pool, router, index, log); err != nil {
		d.close()
		return nil, err
	}
	httpPool, err := startPassthrough(c, log)
	if err != nil {
		d.close()
		return nil, err
	}
	d.steer = httpPool
	metrics := dataplane.NewMetrics(d.pool, router)
	if d.ring != nil {
		metrics.RegisterRing(d.ring)
	}
	if httpPool != nil {
		metrics.RegisterPassthrough(httpPool)
	}
	gw := &dataplane.Gateway{Tok: tok, Router: router, Pool: d.pool, Log: log, APIKeys: c.apiKeys,
		Retries: c.retries, FirstTokenTimeout: c.firstTokenTimeout, Metrics: metrics, Passthrough: httpPool}
	c.http.Logger = log
	d.http = httpx.NewServer(c.http, gw)
	go func() { d.served <- d.http.Serve() }()
	select {
	case <-d.http.Booted():
	case err := <-d.served:
		d.close()
		return nil, fmt.Errorf("HTTP server: %w", err)
	}
	if err := d.startAdmin(c.adminListen, metrics, router, index); err != nil {
		d.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go maintain(ctx, index)
	if c.simEngines > 0 {
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		if err := d.pool.WaitReady(wctx, c.simEngines); err != nil {
			log.Warn("simulated engines not all ready", "err", err)
		}
	}
	ringAddr := ""
	if d.ring != nil {
		ringAddr = d.ring.Addr()
	}
	log.Info("kvgate listening", "addr", d.http.Addr(), "admin", d.admin.Addr, "ring", ringAddr, "engines", addrs,
		"policy", string(c.policy), "tokenizer", tokenizerName(c.tokenizerDir))
	return d, nil
}

func loadTokenizer(dir string) (*tokenize.Tokenizer, error) {
	if dir == "" {
		return tokenize.Builtin()
	}
	return tokenize.LoadDir(dir)
}

func tokenizerName(dir string) string {
	if dir == "" {
		return tokenize.BuiltinName
	}
	return dir
}

// startSims runs the embedded default's engines on loopback: real TCP, the
// real wire protocol, serving the built-in tokenizer's model name.
func (d *daemon) startSims(c *config) ([]string, error) {
	profile, err := sim.LoadProfile(c.simProfile)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for i := range c.simEngines {
		cfg := sim.DefaultConfig()
		cfg.ID = fmt.Sprintf("sim-%d", i)
		cfg.Rank.Model, cfg.Rank.Profile, cfg.Rank.GPUBlocks = "Qwen/Qwen3-8B", profile, c.simGPUBlocks
		if c.maxModelLen > 0 {
			cfg.Rank.MaxModelLen = c.maxModelLen + 1<<16
		}
		cfg.Speed, cfg.Secret, cfg.Logger = c.simSpeed, c.secret, d.log
		s, err := sim.NewServer(cfg)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		go func() { _ = s.Serve(ln) }()
		d.sims = append(d.sims, s)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

func (d *daemon) startAdmin(addr string, m *dataplane.Metrics, r *route.Router, index *kvstore.Index) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		st := state(d.pool, r, index)
		if d.ring != nil {
			st["ring"] = d.ring.Stats()
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	d.admin = &http.Server{Handler: mux, Addr: ln.Addr().String(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.admin.Serve(ln) }()
	return nil
}

// state is /debug/state: engines, their load and the index.
func state(pool *engine.Pool, r *route.Router, index *kvstore.Index) map[string]any {
	var engines []map[string]any
	for _, e := range pool.Engines() {
		info := e.Info()
		engines = append(engines, map[string]any{"addr": e.Addr, "id": info.ID, "state": e.State().String(),
			"models": info.Models, "block_size": info.BlockSize, "inflight": r.Inflight(e), "peer_load": r.PeerLoad(e), "reported_load": e.Load()})
	}
	st := index.Stats()
	return map[string]any{"policy": r.Policy(), "engines": engines,
		"index": map[string]any{"entries": st.Entries, "bytes": st.Bytes, "events_applied": st.EventsApplied, "engines": st.Engines}}
}

// maintain runs the index's periodic work: expiring approximate entries and
// sweeping stale ones, a shard at a time.
func maintain(ctx context.Context, index *kvstore.Index) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			index.ExpireApprox()
			index.Sweep(8)
		}
	}
}

// shutdown drains: the HTTP server stops taking requests and lets in-flight
// ones finish, then engines and simulators close.
func (d *daemon) shutdown(ctx context.Context) error {
	err := d.http.Shutdown(ctx)
	d.close()
	return err
}

func (d *daemon) close() {
	if d.stop != nil {
		d.stop()
	}
	if d.admin != nil {
		_ = d.admin.Close()
	}
	if d.ring != nil {
		d.ring.Close() // peers re-form without this replica at once
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.steer != nil {
		_ = d.steer.Close() // polling stops, the steering programs unload
	}
	for _, s := range d.sims {
		s.Close()
	}
}
