package gateway

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
	"github.com/kvgate/kvgate/wire"
)

// splitFleet is a gateway before one prefill engine (prefill-0) and one
// decode engine (decode-0), whose decode batch the router sees busy, so
// that a long prompt is served disaggregated.
type splitFleet struct {
	*testGateway
	router          *route.Router
	prefill, decode *sim.Server
	pe, de          *engine.Engine
	reg             *prometheus.Registry // the gateway's metrics
}

func startSplitFleet(t *testing.T, decodeMod func(*sim.Config), prefillMod ...func(*sim.Config)) *splitFleet {
	t.Helper()
	o := splitOpts{decode: decodeMod}
	if len(prefillMod) > 0 {
		o.prefill = prefillMod[0]
	}
	return startSplitFleetWith(t, o)
}

// splitOpts shape a splitFleet: changes to each simulated engine's
// configuration, a decode engine of the test's own at decodeAddr instead
// of a simulated one, and changes to the gateway.
type splitOpts struct {
	prefill, decode func(*sim.Config)
	decodeAddr      string
	gateway         func(*Gateway)
}

func startSplitFleetWith(t *testing.T, o splitOpts) *splitFleet {
	t.Helper()
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	f := &splitFleet{}
	var addrs []string
	for _, role := range []wire.EngineRole{wire.RolePrefill, wire.RoleDecode} {
		if role == wire.RoleDecode && o.decodeAddr != "" {
			addrs = append(addrs, o.decodeAddr)
			continue
		}
		cfg := sim.DefaultConfig()
		cfg.ID, cfg.Rank.Model, cfg.Rank.Profile = role.String()+"-0", model, sim.ZeroProfile
		cfg.Rank.NoRandomEOS, cfg.Rank.Disagg.Role = true, role
		if role == wire.RoleDecode && o.decode != nil {
			o.decode(&cfg)
		}
		if role == wire.RolePrefill && o.prefill != nil {
			o.prefill(&cfg)
		}
		s, addr := simtest.Serve(t, cfg)
		addrs = append(addrs, addr)
		if role == wire.RolePrefill {
			f.prefill = s
		} else {
			f.decode = s
		}
	}
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := simtest.Pool(t, pcfg, kvstore.New(kvstore.Options{}), addrs...)
	f.pe, f.de = pool.Engines()[0], pool.Engines()[1]
	if f.pe.Info().ID != "prefill-0" {
		f.pe, f.de = f.de, f.pe
	}
	f.router = route.New(pool, route.PolicyKV, route.DefaultWeights())
	// A decode batch the router counts on the decode engine.
	busy, err := f.router.Route(&route.Request{Model: model, Tokens: []uint32{1, 2, 3}})
	if err != nil || busy.Engine != f.de {
		t.Fatalf("busy request: %v", err)
	}
	busy.FirstToken()
	busy.Generated(40000)
	t.Cleanup(busy.Done)
	logs := &syncBuffer{}
	g := &Gateway{Tok: tok, Router: f.router, Pool: pool, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Retries: 1, FirstTokenTimeout: time.Minute}
	f.reg = prometheus.NewRegistry()
	g.Metrics = NewMetrics(f.reg)
	if o.gateway != nil {
		o.gateway(g)
	}
	f.testGateway = serveGateway(t, g, logs)
	return f
}

// longPrompt is a prompt of some 2,000 tokens, none of them cached.
func longPrompt(salt int) string {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "w%d_%d ", salt, i)
	}
	return sb.String()
}

// idle waits until neither engine carries a reservation of the gateway's
// requests (the decode engine keeps the test's busy one).
func (f *splitFleet) idle(t *testing.T) {
	t.Helper()
	waitInflightZero(t, f.srv)
	if p, d := f.router.Inflight(f.pe), f.router.Inflight(f.de); p.Requests != 0 || d.Requests != 1 {
		t.Fatalf("reservations left: prefill %+v, decode %+v", p, d)
	}
}

// counts checks the disaggregation metrics: decisions by mode, then
// transfers by outcome (ok, failed, timeout, cancelled).
func (f *splitFleet) counts(t *testing.T, split, aggregated float64, transfers ...float64) {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name, label, v string) float64 {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label && l.GetValue() == v {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	got := []float64{value("kvgate_disagg_decisions_total", "mode", "split"), value("kvgate_disagg_decisions_total", "mode", "aggregated")}
	want := []float64{split, aggregated}
	for i, o := range []string{transferOK, transferFailed, transferTimeout, transferCancelled} {
		got = append(got, value("kvgate_disagg_transfers_total", "outcome", o))
		want = append(want, transfers[i])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("split, aggregated, transfers ok/failed/timeout/cancelled: got %v, want %v", got, want)
	}
}

// TestSplitStream: a long prompt is prefilled on the prefill engine and
// decoded on the decode engine; the client gets one stream of exactly
// max_tokens tokens (one logprob each), both engines named.
func TestSplitStream(t *testing.T) {
	f := startSplitFleet(t, nil)
	body := `{"model":"` + model + `","prompt":"` + longPrompt(1) + `","max_tokens":20,"stream":true,"stream_options":{"include_usage":true},"logprobs":1}`
	resp, out := post(t, f.base+"/v1/completions", "", body)
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-engine") != "decode-0" || resp.Header.Get(prefillEngineHeader) != "prefill-0" {
		t.Fatalf("%d engine %q prefill engine %q: %s", resp.StatusCode, resp.Header.Get("x-kvgate-engine"), resp.Header.Get(prefillEngineHeader), out)
	}
	tokens, usage := 0, map[string]any(nil)
	for _, ev := range sseData(t, out) {
		for _, c := range ev["choices"].([]any) {
			if lp, ok := c.(map[string]any)["logprobs"].(map[string]any); ok {
				tokens += len(lp["tokens"].([]any))
			}
		}
		if u, ok := ev["usage"].(map[string]any); ok {
			usage = u
		}
	}
	if tokens != 20 || usage == nil || usage["completion_tokens"] != 20.0 {
		t.Fatalf("%d tokens streamed, usage %v: %s", tokens, usage, out)
	}
	f.idle(t)
	// A short prompt is served aggregated, on the decode engine.
	resp, out = post(t, f.base+"/v1/completions", "", `{"model":"`+model+`","prompt":"hi","max_tokens":3}`)
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-engine") != "decode-0" || resp.Header.Get(prefillEngineHeader) != "" {
		t.Fatalf("short prompt: %d %v: %s", resp.StatusCode, resp.Header, out)
	}
	f.idle(t)
	f.counts(t, 1, 1, 1, 0, 0, 0)
}

// TestSplitTransferFails: a transfer that cannot complete ends the
// client's stream, after its first token, with an in-stream error, and
// releases both reservations.
func TestSplitTransferFails(t *testing.T) {
	f := startSplitFleet(t, func(c *sim.Config) { c.Rank.Disagg.Link = sim.TierLink{GBps: 1e-6, Latency: time.Hour} })
	body := `{"model":"` + model + `","prompt":"` + longPrompt(2) + `","max_tokens":20,"stream":true}`
	resp, out := post(t, f.base+"/v1/completions", "", body)
	if resp.StatusCode != 200 || !strings.Contains(out, `"error"`) || !strings.Contains(out, "mid-stream") {
		t.Fatalf("%d: %s", resp.StatusCode, out)
	}
	f.idle(t)
	f.counts(t, 1, 0, 0, 1, 0, 0)
}

// TestSplitPrefillDies: the prefill engine going away after the hand-off,
// before its KV reached the decode engine, ends the client's stream with
// an in-stream error and cancels the decode side.
func TestSplitPrefillDies(t *testing.T) {
	// The link's latency keeps the KV in flight for 25 s, inside the
	// hand-off deadline (route.HandoffDeadline, 30 s, past which the decode
	// engine refuses the transfer), so even a slow machine kills the
	// prefill engine before the KV arrives.
	f := startSplitFleet(t, func(c *sim.Config) { c.Rank.Disagg.Link = sim.TierLink{GBps: 25, Latency: 25 * time.Second} })
	body := `{"model":"` + model + `","prompt":"` + longPrompt(3) + `","max_tokens":20,"stream":true}`
	req, _ := http.NewRequest("POST", f.base+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var got strings.Builder
	for sc.Scan() {
		line := sc.Text()
		got.WriteString(line + "\n")
		if strings.HasPrefix(line, "data: {") && !strings.Contains(line, `"error"`) && f.prefill != nil {
			f.prefill.Close() // the first token is out: the prefill engine dies
			f.prefill = nil
		}
	}
	if resp.Header.Get(prefillEngineHeader) != "prefill-0" || !strings.Contains(got.String(), "ended before its KV reached") {
		t.Fatalf("%v: %s", resp.Header, got.String())
	}
	waitInflightZero(t, f.srv)
	if d := f.router.Inflight(f.de); d.Requests != 1 {
		t.Fatalf("decode reservations left: %+v", d)
	}
	f.counts(t, 1, 0, 0, 1, 0, 0)
}

// TestSplitDecodeDiesBeforeHandoff: the decode engine going away while
// the prefill engine works costs the client no token: the request is
// routed again (here to no engine left: a 503 before any output) and both
// reservations are released.
func TestSplitDecodeDiesBeforeHandoff(t *testing.T) {
	f := startSplitFleet(t, nil, func(c *sim.Config) {
		c.Rank.Profile, c.Speed = sim.DefaultProfile, 0.05 // a 2,000-token prefill takes seconds
	})
	type answer struct {
		resp *http.Response
		body string
	}
	done := make(chan answer, 1)
	go func() {
		body := `{"model":"` + model + `","prompt":"` + longPrompt(4) + `","max_tokens":20,"stream":true}`
		resp, out := post(t, f.base+"/v1/completions", "", body)
		done <- answer{resp, out}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for f.router.Inflight(f.pe).Requests == 0 { // the prefill side is on its way
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the prefill engine")
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
	f.decode.Close()
	a := <-done
	if a.resp.StatusCode != 503 || strings.Contains(a.body, "data:") || a.resp.Header.Get(prefillEngineHeader) != "" {
		t.Fatalf("%d %v: %s", a.resp.StatusCode, a.resp.Header, a.body)
	}
	waitInflightZero(t, f.srv)
	if p := f.router.Inflight(f.pe); p.Requests != 0 || p.PrefillTokens != 0 || p.DecodeTokens != 0 {
		t.Fatalf("prefill reservation left: %+v", p)
	}
}
