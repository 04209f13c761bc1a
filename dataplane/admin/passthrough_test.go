package admin

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
)

// TestPassthroughCutLabels: the responses-cut counter has one series per
// engine and reason, with the reason labels dashboards select on.
func TestPassthroughCutLabels(t *testing.T) {
	p, err := passthrough.NewPool([]string{"http://127.0.0.1:9"}, ebpf.NewCopy(), route.DefaultWeights(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	RegisterPassthrough(reg, p)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, f := range families {
		if f.GetName() != "kvgate_http_responses_cut_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["engine"] != "http://127.0.0.1:9" || m.GetCounter().GetValue() != 0 {
				t.Errorf("series %v = %v", labels, m.GetCounter().GetValue())
			}
			reasons = append(reasons, labels["reason"])
		}
	}
	slices.Sort(reasons)
	if want := []string{"duplicated", "other", "truncated"}; !slices.Equal(reasons, want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
}
