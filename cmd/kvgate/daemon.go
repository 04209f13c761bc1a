package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/admin"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/gateway"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/procs"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/syncring"
)

// daemon is a running kvgate.
type daemon struct {
	log    *slog.Logger
	sims   *sim.Local
	pool   *engine.Pool
	ring   *syncring.Ring
	disc   *discoveryRun
	steer  *passthrough.Pool
	obs    *obsRun // nil: no tracing (obs.go)
	http   *httpx.Server
	admin  *admin.Server
	served chan error
	stop   context.CancelFunc
}

func start(c *config, log *slog.Logger) (*daemon, error) {
	d := &daemon{log: log, served: make(chan error, 1)}
	tk, err := loadTokenizers(c)
	if err != nil {
		return nil, err
	}
	// Parsing tokenizer.json files leaves garbage several times the
	// tokenizers' size (a Gemma's is 33 MB of JSON): hand it back to the
	// system now rather than carry it as resident memory.
	debug.FreeOSMemory()
	tok := tk.tok
	checkLimits(log)
	rt := sizeRuntime(c, log)
	if err := engine.ConfigureNetpoll(log, rt.Pollers); err != nil {
		return nil, err
	}
	addrs := c.engines
	if c.simEngines > 0 {
		if addrs, err = d.startSims(c, tk); err != nil {
			return nil, err
		}
	}
	index := kvstore.New(kvstore.Options{})
	pcfg := engine.DefaultConfig()
	pcfg.Secret, pcfg.Logger = c.secret, log
	c.engine.apply(&pcfg)
	c.discovery.apply(&pcfg)
	d.pool = engine.NewPool(pcfg, index, addrs)
	router := route.New(d.pool, c.policy, c.weights)
	router.SetAdapterWeights(c.lora.weights)
	if d.ring, err = startRing(&c.ring, d.pool, router, index, log); err != nil {
		d.close()
		return nil, err
	}
	d.disc = startDiscovery(&c.discovery, d.pool, d.ring, log)
	httpPool, err := startPassthrough(c, log)
	if err != nil {
		d.close()
		return nil, err
	}
	d.steer = httpPool
	reg := prometheus.NewRegistry()
	gov := rt.Governor(log)
	procs.Register(reg, gov)
	admin.RegisterEngines(reg, d.pool, router, httpPool)
	if d.ring != nil {
		admin.RegisterRing(reg, d.ring)
	}
	if httpPool != nil {
		admin.RegisterPassthrough(reg, httpPool)
	}
	gw := &gateway.Gateway{Models: tk.models, Tok: tok, Router: router, Pool: d.pool, Log: log, APIKeys: c.apiKeys,
		Retries: c.retries, FirstTokenTimeout: c.firstTokenTimeout, TransferTimeout: c.disagg.transferTimeout, Metrics: gateway.NewMetrics(reg), Passthrough: httpPool,
		MaxModelLen: c.maxModelLen, ToolParser: c.toolParser, ReasoningParser: c.reasoningParser,
		Media: c.media.gateway()}
	if d.obs, err = c.obs.start(gw, c.policy, log); err != nil { // obs.go: access log, tracing
		d.close()
		return nil, err
	}
	c.http.Logger = log
	d.http = httpx.NewServer(c.http, gw)
	go func() { d.served <- d.http.Serve() }()
	select {
	case <-d.http.Booted():
	case err := <-d.served:
		d.close()
		return nil, fmt.Errorf("HTTP server: %w", err)
	}
	d.admin = admin.NewServer(reg)
	state := func() *admin.State { return admin.Snapshot(d.pool, router, index, d.ring, httpPool) }
	d.admin.HandleJSON("/debug/state", func() any { return state() })
	history := admin.NewHistory(statusSamples)
	status := admin.StatusSource{State: state, Metrics: reg}
	d.admin.MountStatus(status, history, statusEvery)
	d.admin.MountEngines(d.disc, c.discovery.token)
	reload := newReloader(c, gw, router, d.pool, log)
	d.admin.MountReload(func() (*admin.ReloadResult, error) { return reload.reload("POST /admin/reload") }, c.discovery.token)
	if err := d.admin.Listen(c.adminListen); err != nil {
		d.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go index.Maintain(ctx)
	if gov != nil {
		go gov.Run(ctx)
	}
	go history.Record(ctx, statusEvery, status)
	reload.watch(ctx) // SIGHUP
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
	log.Info("kvgate listening", "addr", d.http.Addr(), "admin", d.admin.Addr(), "ring", ringAddr, "engines", addrs,
		"policy", string(c.policy), "tokenizer", tk.name, "models", tk.names())
	return d, nil
}

// The status page's history: a sample every statusEvery, the last ten
// minutes kept.
const (
	statusEvery   = 2 * time.Second
	statusSamples = 300
)

// tokenizers are what the gateway tokenizes with: the --model models,
// or the one tokenizer of the --tokenizer shorthand.
type tokenizers struct {
	models   []*gateway.Model // none: the shorthand
	tok      *tokenize.Tokenizer
	name     string // the shorthand's tokenizer, or the first model's
	simModel string // what --sim-engines serve
	simLen   int    // and their context (0: sim's default)
}

// sizeRuntime plans the HTTP event loops, netpoll's pollers and the
// runtime's Ps (dataplane/procs), keeping the operator's GOMAXPROCS, and
// logs the plan.
func sizeRuntime(c *config, log *slog.Logger) procs.Plan {
	_, fixed := os.LookupEnv("GOMAXPROCS")
	p := procs.New(c.http.EventLoops, fixed, c.extraProcs, c.adaptiveProcs)
	p.Apply()
	c.http.EventLoops = p.EventLoops
	log.Info("runtime sized", "cpus", p.CPUs, "event_loops", p.EventLoops, "netpoll_pollers", p.Pollers,
		"gomaxprocs", p.GOMAXPROCS, "gomaxprocs_from_env", fixed, "adaptive_procs", p.Adaptive)
	return p
}

// loadTokenizers loads --model's models or --tokenizer's tokenizer, each
// checked: its tokenizer loads and its chat template renders.
func loadTokenizers(c *config) (*tokenizers, error) {
	if len(c.models) > 0 {
		models, err := gateway.LoadModels(c.models)
		if err != nil {
			return nil, err
		}
		return &tokenizers{models: models, tok: models[0].Tok, name: models[0].TokName, simModel: models[0].Name, simLen: models[0].MaxModelLen}, nil
	}
	tok, name, err := tokenize.Open(c.tokenizerDir)
	if err != nil {
		return nil, err
	}
	if c.maxModelLen > 0 {
		tok.Config.ModelMaxLength = c.maxModelLen
	}
	one := &gateway.Model{Name: name, Tok: tok, ToolParser: c.toolParser, ReasoningParser: c.reasoningParser}
	if err := one.Check(); err != nil { // its chat template renders
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	return &tokenizers{tok: tok, name: name, simModel: "Qwen/Qwen3-8B", simLen: c.maxModelLen}, nil
}

// names are the served models as name=tokenizer, for the log.
func (t *tokenizers) names() []string {
	out := make([]string, 0, len(t.models))
	for _, m := range t.models {
		out = append(out, m.Name+"="+m.TokName)
	}
	return out
}

// startSims runs the embedded default's engines on loopback: real TCP, the
// real wire protocol, serving tk's simModel (the built-in tokenizer's
// model name, or the first --model) with its context. They answer prompts
// that offer tools with tool calls (sim.ToolCalls).
func (d *daemon) startSims(c *config, tk *tokenizers) ([]string, error) {
	tok := tk.tok
	profile, err := sim.LoadProfile(c.simProfile)
	if err != nil {
		return nil, err
	}
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile, cfg.Rank.GPUBlocks = tk.simModel, profile, c.simGPUBlocks
	cfg.Rank.CPUBlocks, cfg.Rank.DiskBlocks = c.simCPUBlocks, c.simDiskBlocks
	if tk.simLen > 0 {
		cfg.Rank.MaxModelLen = tk.simLen // the gateway holds requests to the same context
	}
	cfg.Speed, cfg.Secret, cfg.Logger = c.simSpeed, c.secret, d.log
	cfg.Rank.Tools = sim.NewToolCalls(func(s string) []uint32 { return tok.Encode(nil, s, false) },
		func(ids []uint32) string { return tok.DecodeString(ids, false) })
	if d.sims, err = sim.StartLocal(c.simEngines, cfg, "sim"); err != nil {
		return nil, err
	}
	return d.sims.Addrs, nil
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
	if d.disc != nil {
		d.disc.close() // no engine comes or goes from here on
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
	if d.sims != nil {
		d.sims.Close()
	}
	d.obs.close() // the last requests' spans are exported
}
