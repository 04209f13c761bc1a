package admin

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/syncring"
)

type noLoad struct{}

func (noLoad) ReadLoad(_ []syncring.Load, mark func()) { mark() }

// TestRingEngineMetrics: kvgate_ring_engines and kvgate_ring_shared_engines
// are the ring's own engine count and the count every member shares, as
// two replicas with overlapping engine sets see them.
func TestRingEngineMetrics(t *testing.T) {
	lns := make([]net.Listener, 2)
	var addrs []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs = ln, append(addrs, ln.Addr().String())
	}
	start := func(id string, ln net.Listener, engines []string) *syncring.Ring {
		cfg := syncring.DefaultConfig()
		cfg.ID, cfg.Listener, cfg.Engines, cfg.Peers, cfg.Source = id, ln, engines, addrs, noLoad{}
		r, err := syncring.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	a := start("a", lns[0], []string{"e1:1", "e2:1", "e3:1"})
	start("b", lns[1], []string{"e2:1", "e3:1"})
	reg := prometheus.NewPedanticRegistry()
	RegisterRing(reg, a)
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		got := gauges(t, reg)
		if got["kvgate_ring_members"] != 2 || got["kvgate_ring_engines"] != 3 || got["kvgate_ring_shared_engines"] != 2 {
			return fmt.Errorf("members, engines, shared engines = %v, %v, %v; want 2, 3, 2", got["kvgate_ring_members"],
				got["kvgate_ring_engines"], got["kvgate_ring_shared_engines"])
		}
		return nil
	})
}

// gauges gathers reg's unlabelled gauges by name.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 0 && m.GetGauge() != nil {
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
