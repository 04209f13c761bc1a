//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// fleetEngine is one fake vLLM of TestBridgeFleetTiers with its bridge.
type fleetEngine struct {
	id    string
	enc   vllmtest.Encoding
	opts  []vllmtest.Option
	flags []string          // the bridge's, beyond the common ones
	loras map[string]uint32 // its adapters' wire ids, as its --lora flags number them
	f     *vllmtest.Fake
	addr  string // the bridge's wire listener: kvgate's name for the engine
	admin string // the bridge's admin listener
	seed  int    // the next prompt of its own
}

// Sizes of the fleet's fakes, in 16-token blocks.
const (
	fleetGPUBlocks = 48
	fleetCPUBlocks = 32
)

// TestBridgeFleetTiers: kvgate -> three kvgate-bridge processes -> three
// fake vLLMs: vllm-a (older positional encoding, int GPU hashes) and
// vllm-b (map encoding, bytes hashes) offload evicted GPU blocks into a
// CPU tier, announced as vLLM's OffloadingConnector does (medium CPU, no
// tokens, raw-bytes hashes, block_size 0 on a and the real size on b);
// vllm-c serves two LoRA adapters (bridge --lora name=id, and a name
// only), its blocks carrying (lora_name,) in extra_keys. After every
// phase (warm-up, eviction into CPU and back, LoRA requests through
// kvgate, a restart of vllm-a's engine and publisher on the same ports
// while the others serve all along) kvgate's index holds, per engine and
// tier, exactly the blocks each engine holds on its GPU and in its CPU
// tier.
func TestBridgeFleetTiers(t *testing.T) {
	engines := []*fleetEngine{
		{id: "vllm-a", enc: vllmtest.Positional, opts: []vllmtest.Option{vllmtest.WithOffload(fleetCPUBlocks, false)}},
		{id: "vllm-b", enc: vllmtest.Tagged, opts: []vllmtest.Option{vllmtest.WithOffload(fleetCPUBlocks, true)}},
		{id: "vllm-c", enc: vllmtest.Tagged, opts: []vllmtest.Option{vllmtest.WithLoRA("sql-adapter", 7), vllmtest.WithLoRA("chat-adapter", 0)},
			flags: []string{"--lora", "sql-adapter=7", "--lora", "chat-adapter"}, loras: map[string]uint32{"sql-adapter": 1, "chat-adapter": 2}},
	}
	var addrs []string
	for i, e := range engines {
		var err error
		if e.f, err = vllmtest.Start(model, 16, fleetGPUBlocks, e.enc, e.opts...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.f.Close() })
		e.seed = 1000 * (i + 1)
		br := start(t, "kvgate-bridge", append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--engine-url", e.f.URL, "--kv-events", e.f.EventsURL, "--replay", e.f.ReplayURL, "--model", model,
			"--block-size", "16", "--id", e.id, "--metrics-interval", "100ms"}, e.flags...)...)
		line := br.waitLog(t, "bridge serving")
		e.addr = line["addr"].(string)
		addrs = append(addrs, e.addr)
		e.admin = "http://" + line["admin"].(string)
	}
	_, base := startKvgate(t, "--engine", strings.Join(addrs, ","))
	waitReady(t, base)
	admin := adminOf(t, base)
	a, b, c := engines[0], engines[1], engines[2]
	phase := func(name string, nudge bool) {
		t.Helper()
		began := time.Now()
		waitTiers(t, admin, engines, nudge)
		t.Logf("%s: index equal to every engine's tiers after %v: %s", name, time.Since(began).Round(time.Millisecond), tiersOf(engines))
	}

	// Warm-up. PUB drops what precedes a subscription: once a batch of
	// each engine reached the index, the engines reset their caches
	// (reset_prefix_cache, which the bridge passes on as a clear of every
	// tier) and serve afresh, so the index can hold all they hold.
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		st := indexSets(t, admin)
		for _, e := range engines {
			if st[e.addr].Blocks == ([3]uint64{}) {
				e.serve(4)
				return fmt.Errorf("no KV event of %s reached kvgate's index yet (index %v; bridge: %s)", e.id, st, bridgeEvents(e.admin))
			}
		}
		return nil
	})
	for _, e := range engines {
		e.f.Clear()
	}
	for i := range 6 {
		complete(t, base, fmt.Sprintf("Fleet warm-up %d. %s", i, strings.Repeat("Three engines, two tiers, one index. ", 8)), 1)
	}
	for _, e := range engines {
		e.serve(4)
	}
	phase("warm-up", false)

	// Eviction into CPU: a and b take far more than their GPU holds; the
	// evicted blocks go to the CPU tier, whose own evictions are removals.
	for _, e := range []*fleetEngine{a, b} {
		e.fill()
	}
	for _, e := range []*fleetEngine{a, b} {
		if e.f.Blocks() != fleetGPUBlocks || e.f.CPUBlocks() != fleetCPUBlocks {
			t.Fatalf("%s holds %d GPU and %d CPU blocks, want full tiers of %d and %d", e.id, e.f.Blocks(), e.f.CPUBlocks(), fleetGPUBlocks, fleetCPUBlocks)
		}
	}
	phase("eviction into CPU", false)
	// A prompt in the CPU tier only, served again, comes back to the GPU
	// (held in both tiers), evicting others into CPU.
	for _, e := range []*fleetEngine{a, b} {
		e.serveFromCPU(t)
	}
	phase("CPU back to GPU", false)
	for _, e := range []*fleetEngine{a, b} {
		if e.f.BothTiers() == 0 {
			t.Fatalf("%s holds no block in both tiers after serving one from CPU", e.id)
		}
	}
	for _, e := range []*fleetEngine{a, b} {
		for _, reason := range []string{"unknown_tier", "undecodable_event"} {
			waitMetric(t, e.admin, fmt.Sprintf("kvgate_bridge_blocks_skipped_total{reason=%q} ", reason), " 0")
		}
	}

	// LoRA requests, through kvgate: only vllm-c serves the adapters.
	loraText := strings.Repeat("SELECT name FROM users WHERE id = 1; ", 12)
	for i, m := range []string{"sql-adapter", "sql-adapter", "chat-adapter", model} {
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": m, "prompt": fmt.Sprintf("%d %s", i%2, loraText), "max_tokens": 1})
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
		if got := resp.Header.Get("x-kvgate-engine"); m != model && got != c.id {
			t.Fatalf("a request for %s went to %s", m, got)
		}
	}
	adapters := 0
	for _, r := range c.f.Requests() {
		if r.Model != model {
			adapters++
		}
	}
	if adapters != 3 {
		t.Fatalf("vllm-c got %d adapter requests, want 3", adapters)
	}
	phase("LoRA requests", false)
	for _, reason := range []string{"unknown_lora", "extra_keys", "undecodable_event"} {
		waitMetric(t, c.admin, fmt.Sprintf("kvgate_bridge_blocks_skipped_total{reason=%q} ", reason), " 0")
	}
	// The adapters' blocks are indexed under kvgate's key for each: a
	// repeated adapter prompt is predicted cached as the engine serves it,
	// the same tokens for the base model are not.
	cached := func(m string) (predicted, reported float64) {
		p0, r0 := metricFloat(t, admin, "kvgate_predicted_cached_tokens_total "), metricFloat(t, admin, "kvgate_reported_cached_tokens_total ")
		if resp, body := post(t, base+"/v1/completions", map[string]any{"model": m, "prompt": "0 " + loraText, "max_tokens": 1}); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
		return metricFloat(t, admin, "kvgate_predicted_cached_tokens_total ") - p0, metricFloat(t, admin, "kvgate_reported_cached_tokens_total ") - r0
	}
	for _, m := range []string{"sql-adapter", "chat-adapter"} {
		if p, r := cached(m); p == 0 || p != r {
			t.Fatalf("%s again: kvgate predicted %v tokens cached, the engine served %v from cache", m, p, r)
		}
	}
	if p, _ := cached(model); p != 0 {
		t.Fatalf("the base model was predicted %v tokens of the adapters' blocks", p)
	}
	phase("LoRA prefixes again", false)

	// vllm-a restarts mid-run (engine and publisher, same ports, sequence
	// from 0, empty tiers) while b and c keep serving: kvgate forgets a's
	// old blocks and indexes the new engine's, GPU and CPU.
	stop, served := make(chan struct{}), make(chan int)
	go func() { // b and c serve all along (a load, not a synchronisation)
		n := 0
		for {
			select {
			case <-stop:
				served <- n
				return
			default:
			}
			b.serve(2)
			c.f.ServeLoRA("sql-adapter", c.prompt(2))
			n++
			time.Sleep(2 * time.Millisecond)
		}
	}()
	a.f.Close()
	ev, rp, hp := a.f.Addrs()
	var err error
	a.f, err = vllmtest.Start(model, 16, fleetGPUBlocks, a.enc, append(a.opts, vllmtest.WithAddrs(ev, rp, hp))...)
	if err == nil {
		a.serve(4)
		time.Sleep(50 * time.Millisecond) // more of b's and c's load after the restart
	}
	close(stop)
	t.Logf("b and c served %d prompts each during a's restart", <-served)
	if err != nil {
		t.Fatal(err)
	}
	phase("publisher restart", true)
	waitMetric(t, a.admin, "kvgate_bridge_publisher_restarts_total ", " 1")
	a.fill()
	b.fill()
	if a.f.CPUBlocks() != fleetCPUBlocks {
		t.Fatalf("the restarted vllm-a holds %d CPU blocks, want %d", a.f.CPUBlocks(), fleetCPUBlocks)
	}
	phase("eviction into CPU after the restart", false)
}

// prompt is a prompt of n blocks of e's own, never served before.
func (e *fleetEngine) prompt(n int) []uint32 {
	e.seed++
	p := make([]uint32, 16*n)
	for i := range p {
		p[i] = uint32(e.seed*1000 + i + 1)
	}
	return p
}

// serve runs a new n-block prompt through e's engine (events included),
// as a request routed to it would.
func (e *fleetEngine) serve(n int) { e.f.Serve(e.prompt(n)) }

// fill serves new prompts on e until both its tiers are full, and 4 more
// (evictions from both).
func (e *fleetEngine) fill() {
	for range 100 {
		if e.f.Blocks() == fleetGPUBlocks && e.f.CPUBlocks() == fleetCPUBlocks {
			break
		}
		e.serve(6)
	}
	for range 4 {
		e.serve(6)
	}
}

// serveFromCPU serves again a prompt whose first block is in e's CPU tier
// only.
func (e *fleetEngine) serveFromCPU(t *testing.T) {
	t.Helper()
	for s := e.seed; s > e.seed-200 && s > 0; s-- {
		p := make([]uint32, 16*6)
		for i := range p {
			p[i] = uint32(s*1000 + i + 1)
		}
		if hs := e.f.BlockHashes(p); e.f.CachedCPU(hs[0]) && !e.f.Cached(hs[0]) {
			e.f.Serve(p)
			return
		}
	}
	t.Fatalf("%s: no prompt is in the CPU tier only", e.id)
}

func tiersOf(engines []*fleetEngine) string {
	var parts []string
	for _, e := range engines {
		parts = append(parts, fmt.Sprintf("%s GPU %d CPU %d", e.id, e.f.Blocks(), e.f.CPUBlocks()))
	}
	return strings.Join(parts, ", ")
}

// waitTiers waits until kvgate's index holds, per engine, the GPU and CPU
// blocks its fake holds, hash for hash (and none on disk). With nudge,
// each failed look serves one more prompt on the engines that differ: a
// batch published while a subscription was landing shows missing only
// when the next comes.
func waitTiers(t *testing.T, admin string, engines []*fleetEngine, nudge bool) {
	t.Helper()
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		st := indexSets(t, admin)
		var diffs []string
		for _, e := range engines {
			if err := sameSet(st[e.addr], engineSet(t, e.f, e.loras)); err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: %v", e.id, err))
				if nudge {
					e.serve(2)
				}
			}
		}
		if len(diffs) > 0 {
			return fmt.Errorf("kvgate's index differs: %s", strings.Join(diffs, "; "))
		}
		// A block in both tiers is one block of the bridge's table.
		for _, e := range engines {
			distinct := e.f.Blocks() + e.f.CPUBlocks() - e.f.BothTiers()
			if got := metricValue(e.admin, "kvgate_bridge_blocks "); got != fmt.Sprint(distinct) {
				return fmt.Errorf("%s's bridge knows %s distinct blocks, the engine holds %d", e.id, got, distinct)
			}
		}
		return nil
	})
}

// metricValue is the value of the line of admin's /metrics starting with
// prefix ("" when none).
func metricValue(admin, prefix string) string {
	r, err := http.Get(admin + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimPrefix(line, prefix)
		}
	}
	return ""
}

// metricFloat is the value of the line of admin's /metrics starting with
// prefix.
func metricFloat(t *testing.T, admin, prefix string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(metricValue(admin, prefix), &v); err != nil {
		t.Fatalf("metric %s: %v", prefix, err)
	}
	return v
}

// bridgeEvents is a bridge's event counters, for a failure message.
func bridgeEvents(admin string) string {
	r, err := http.Get(admin + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer r.Body.Close()
	var buf strings.Builder
	b := make([]byte, 1<<20)
	n, _ := io.ReadFull(r.Body, b)
	for _, line := range strings.Split(string(b[:n]), "\n") {
		if strings.HasPrefix(line, "kvgate_bridge_") && !strings.HasSuffix(line, " 0") {
			buf.WriteString(line + "; ")
		}
	}
	return buf.String()
}
