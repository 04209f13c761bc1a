// Package passthrough serves requests with OpenAI-compatible HTTP engines
// that kvgate reaches with nothing beside them (--http-engine): no wire
// protocol, no KV events. kvgate tokenizes the prompt as for any engine,
// routes by approximate prefix (the blocks of the prompts it sent each
// engine, with a time to live and a bound, weighed with its own in-flight
// prefill), forwards the client's request bytes unchanged but for
// "Connection: close", and relays the engine's response unchanged with
// the steering mode of package ebpf. Its goroutines and atomics:
// dataplane/LOCKS.md.
package passthrough

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
	"github.com/kvgate/kvgate/kvstore"
)

// BlockSize is the block size of the approximate index (vLLM's default).
const BlockSize = 16

// Engine is one HTTP engine.
type Engine struct {
	URL      string
	Host     string // host:port to dial
	slot     kvstore.Slot
	models   atomic.Pointer[[]string]
	healthy  atomic.Bool
	prefill  atomic.Int64 // uncached prompt tokens sent and not finished
	inflight atomic.Int64 // requests sent and not finished
	cut      [numCutReasons]atomic.Uint64
}

// Healthy reports whether the engine answered its last poll.
func (e *Engine) Healthy() bool { return e.healthy.Load() }

// InflightPrefill is the uncached prompt tokens sent and not finished.
func (e *Engine) InflightPrefill() int64 { return e.prefill.Load() }

// InflightRequests is the requests sent and not finished.
func (e *Engine) InflightRequests() int64 { return e.inflight.Load() }

// Models returns the models the engine listed.
func (e *Engine) Models() []string {
	if m := e.models.Load(); m != nil {
		return *m
	}
	return nil
}

// Serves reports whether the engine lists model.
func (e *Engine) Serves(model string) bool {
	m := e.models.Load()
	return e.healthy.Load() && m != nil && slices.Contains(*m, model)
}

// Pool is the set of HTTP engines.
type Pool struct {
	Engines []*Engine
	Steer   ebpf.Steerer
	log     *slog.Logger
	w       route.Weights
	index   *kvstore.Index
	client  *http.Client
	hashMu  sync.Mutex
	hashers map[string]*kvstore.Hasher
	stop    context.CancelFunc
	polling sync.WaitGroup
}

// NewPool registers engines at urls (http://host:port) relayed with steer.
func NewPool(urls []string, steer ebpf.Steerer, w route.Weights, log *slog.Logger) (*Pool, error) {
	p := &Pool{Steer: steer, log: log, w: w, client: &http.Client{Timeout: 5 * time.Second},
		index: kvstore.New(kvstore.Options{ApproxTTL: 10 * time.Minute}), hashers: map[string]*kvstore.Hasher{}}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("passthrough: --http-engine %q: want http://host:port", raw)
		}
		host := u.Host
		if u.Port() == "" {
			host += ":80"
		}
		slots, err := p.index.AddEngine(kvstore.EngineConfig{ID: raw, Capacity: [kvstore.NumTiers]uint64{1 << 20}})
		if err != nil {
			return nil, err
		}
		p.Engines = append(p.Engines, &Engine{URL: "http://" + u.Host, Host: host, slot: slots[0]})
	}
	return p, nil
}

// Start polls every engine's /v1/models (health and models) every
// interval until Close.
func (p *Pool) Start(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.polling.Add(1)
	go func() { defer p.polling.Done(); p.run(ctx, every) }()
}

// Close stops polling and unloads the steering mode.
func (p *Pool) Close() error {
	if p.stop != nil {
		p.stop()
		p.polling.Wait()
	}
	return p.Steer.Close()
}

func (p *Pool) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, e := range p.Engines {
			p.poll(ctx, e)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.index.ExpireApprox()
		}
	}
}

func (p *Pool) poll(ctx context.Context, e *Engine) {
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/v1/models", nil)
	resp, err := p.client.Do(req)
	ok := false
	if err == nil {
		var body struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&body) == nil {
			var ms []string
			for _, m := range body.Data {
				ms = append(ms, m.ID)
			}
			e.models.Store(&ms)
			ok = true
		}
		resp.Body.Close()
	}
	if e.healthy.Swap(ok) != ok {
		p.log.Info("HTTP engine", "url", e.URL, "healthy", ok, "models", e.models.Load())
	}
}

// WaitHealthy waits until every engine answered once, or ctx ends.
func (p *Pool) WaitHealthy(ctx context.Context) error {
	for _, e := range p.Engines {
		for !e.healthy.Load() {
			p.poll(ctx, e)
			if e.healthy.Load() {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("passthrough: %s not answering /v1/models: %w", e.URL, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Serves reports whether a healthy engine lists model.
func (p *Pool) Serves(model string) bool {
	for _, e := range p.Engines {
		if e.Serves(model) {
			return true
		}
	}
	return false
}

// ErrNoEngine: no healthy HTTP engine serves the model.
var ErrNoEngine = errors.New("passthrough: no healthy HTTP engine serves the model")

func (p *Pool) hasher(model string) (*kvstore.Hasher, error) {
	p.hashMu.Lock()
	defer p.hashMu.Unlock()
	if h, ok := p.hashers[model]; ok {
		return h, nil
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: BlockSize, Model: model})
	if err == nil {
		p.hashers[model] = h
	}
	return h, err
}

// pick routes a prompt: the least estimated time to first token from the
// approximate prefix each engine holds and the prefill kvgate has in
// flight there, near-ties broken at random as on the wire path
// (route.Weights.PickNearTie); the prompt's blocks are then recorded for
// the choice. The returned function releases the request's load.
func (p *Pool) pick(model string, tokens []uint32, keys *kvstore.Keys) (*Engine, func(), error) {
	h, err := p.hasher(model)
	if err != nil {
		return nil, nil, err
	}
	hs, err := h.Hash(nil, tokens, keys)
	if err != nil {
		return nil, nil, err
	}
	var cands []*Engine
	var slots []kvstore.Slot
	for _, e := range p.Engines {
		if e.Serves(model) {
			cands, slots = append(cands, e), append(slots, e.slot)
		}
	}
	if len(cands) == 0 {
		return nil, nil, ErrNoEngine
	}
	matches := make([]kvstore.Match, len(cands))
	p.index.Match(hs, slots, matches)
	costs := make([]float64, len(cands))
	for i, e := range cands {
		c := route.Candidate{Match: matches[i], BlockSize: BlockSize, QueuedPrefill: float64(e.prefill.Load())}
		costs[i] = p.w.Cost(route.PolicyKV, &c, len(tokens))
	}
	best := p.w.PickNearTie(costs)
	e := cands[best]
	_ = p.index.RecordApprox(e.slot, hs)
	uncached := int64(len(tokens) - BlockSize*matches[best].Depth())
	e.prefill.Add(uncached)
	e.inflight.Add(1)
	var once sync.Once
	return e, func() {
		once.Do(func() {
			e.prefill.Add(-uncached)
			e.inflight.Add(-1)
		})
	}, nil
}
