package procs

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	values := func(g *Governor) map[string]float64 {
		reg := prometheus.NewRegistry()
		Register(reg, g)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				out[mf.GetName()] = c.GetValue()
			} else {
				out[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	if got := values(nil); len(got) != 1 || got["kvgate_gomaxprocs"] != float64(runtime.GOMAXPROCS(0)) {
		t.Fatalf("without a governor: %v", got)
	}
	g := &Governor{extra: 3, set: func(int) {}}
	g.switchTo(true)
	got := values(g)
	if got["kvgate_spare_procs"] != 1 || got["kvgate_gomaxprocs_changes_total"] != 1 || len(got) != 3 {
		t.Fatalf("with the spare Ps on after one change: %v", got)
	}
}
