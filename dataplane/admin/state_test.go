package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
	"github.com/kvgate/kvgate/kvstore"
)

// httpOnly is what a kvgate with only --http-engine has: a wire pool with
// no engines, its router, and an HTTP pool of one engine that lists model
// m and one that answers nothing, polled until the first is healthy.
func httpOnly(t *testing.T) (*engine.Pool, *route.Router, *passthrough.Pool) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	}))
	t.Cleanup(up.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(down.Close)
	hp, err := passthrough.NewPool([]string{up.URL, down.URL}, ebpf.NewCopy(), route.DefaultWeights(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hp.Start(5 * time.Millisecond)
	t.Cleanup(func() { _ = hp.Close() })
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if !hp.Engines[0].Healthy() {
			return errors.New("the engine listing m is not healthy")
		}
		return nil
	})
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), nil)
	t.Cleanup(pool.Close)
	return pool, route.New(pool, route.PolicyKV, route.DefaultWeights()), hp
}

// TestStateHTTPEngines: /debug/state lists the HTTP engines of a kvgate
// that has no others, with their URL, models, health and load.
func TestStateHTTPEngines(t *testing.T) {
	pool, r, hp := httpOnly(t)
	st := Snapshot(pool, r, pool.Index(), nil, hp)
	want := []EngineState{
		{Addr: hp.Engines[0].URL, Kind: KindHTTP, State: "ready", Models: []string{"m"}, BlockSize: passthrough.BlockSize},
		{Addr: hp.Engines[1].URL, Kind: KindHTTP, State: "down", BlockSize: passthrough.BlockSize},
	}
	if len(st.Engines) != len(want) {
		t.Fatalf("engines %+v, want %+v", st.Engines, want)
	}
	for i, w := range want {
		g := st.Engines[i]
		if g.Addr != w.Addr || g.Kind != w.Kind || g.State != w.State || fmt.Sprint(g.Models) != fmt.Sprint(w.Models) ||
			g.BlockSize != w.BlockSize || g.Inflight != w.Inflight || g.ReportedLoad != nil {
			t.Errorf("engine %d: %+v, want %+v", i, g, w)
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"addr":"`+hp.Engines[0].URL+`","kind":"http"`) {
		t.Fatalf("the document does not list the HTTP engine: %s", b)
	}
	if st := Snapshot(pool, r, pool.Index(), nil, nil); st.Engines != nil {
		t.Fatalf("no engines at all: %+v", st.Engines)
	}
}

// TestStateIndexApproxApart: the index's engines show the blocks their
// events put there per tier, and apart from them the approximate entries
// routing recorded before the first event.
func TestStateIndexApproxApart(t *testing.T) {
	pool, r, _ := httpOnly(t)
	index := kvstore.New(kvstore.Options{})
	slots, err := index.AddEngine(kvstore.EngineConfig{ID: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.RecordApprox(slots[0], []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	got := Snapshot(pool, r, index, nil, nil).Index.Engines
	if len(got) != 1 || got[0].Blocks != [kvstore.NumTiers]uint64{} || got[0].ApproxBlocks != 2 || got[0].Precise {
		t.Fatalf("before an event: %+v", got)
	}
	if err := index.Apply(slots[0], []kvstore.Event{{Kind: kvstore.Stored, Hashes: []uint64{3}}}); err != nil {
		t.Fatal(err)
	}
	got = Snapshot(pool, r, index, nil, nil).Index.Engines
	if len(got) != 1 || got[0].Blocks != [kvstore.NumTiers]uint64{1, 0, 0} || got[0].ApproxBlocks != 0 || !got[0].Precise {
		t.Fatalf("after an event: %+v", got)
	}
}

// TestEngineMetricsHTTPEngines: the engine metrics have a series per HTTP
// engine, labelled with its URL, beside the kvgate_http_* ones, in one
// registry without conflict.
func TestEngineMetricsHTTPEngines(t *testing.T) {
	pool, r, hp := httpOnly(t)
	reg := prometheus.NewPedanticRegistry()
	RegisterEngines(reg, pool, r, hp)
	RegisterPassthrough(reg, hp)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var engine string
			for _, l := range m.GetLabel() {
				if l.GetName() == "engine" {
					engine = l.GetValue()
				}
			}
			if engine != "" && len(m.GetLabel()) == 1 {
				got[f.GetName()+" "+engine] = m.GetGauge().GetValue()
			}
		}
	}
	up, down := hp.Engines[0].URL, hp.Engines[1].URL
	for series, want := range map[string]float64{
		"kvgate_engine_ready " + up: 1, "kvgate_engine_ready " + down: 0,
		"kvgate_engine_inflight_prefill_tokens " + up: 0, "kvgate_engine_inflight_requests " + up: 0,
		"kvgate_engine_inflight_prefill_tokens " + down: 0, "kvgate_engine_inflight_requests " + down: 0,
		"kvgate_http_engine_ready " + up: 1, "kvgate_http_engine_ready " + down: 0,
		"kvgate_http_engine_inflight_prefill_tokens " + up: 0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if _, ok := got["kvgate_engine_inflight_decode_tokens "+up]; ok {
		t.Error("a decode series for an HTTP engine, whose decoding kvgate does not follow")
	}
}

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed.
func checkFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
