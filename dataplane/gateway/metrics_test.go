package gateway

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsCachedChildren: the children kept per path, status and engine
// count what WithLabelValues on every call counted: each request once,
// under its path ("other" for a path the gateway does not serve) and
// status (those outside 100-599 too), from goroutines at once.
func TestMetricsCachedChildren(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	obs := []struct {
		path   string
		status int
		n      int
	}{
		{"/v1/completions", 200, 30},
		{"/v1/completions", 429, 3},
		{"/v1/chat/completions", 200, 5},
		{"/health", 200, 2},
		{"/nope", 404, 4},
		{"/also-not", 404, 1},
		{"/v1/messages", 99, 1},
		{"/v1/messages", 600, 2},
		{"/v1/messages", 599, 1},
	}
	var wg sync.WaitGroup
	for _, o := range obs {
		for range o.n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.observeRequest(o.path, o.status, time.Millisecond)
			}()
		}
	}
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.observeFirstToken(fmt.Sprintf("engine-%d", i%2), 10, time.Millisecond, 4, i)
			m.observeLateCached(fmt.Sprintf("engine-%d", i%2), 1)
		}()
	}
	wg.Wait()
	got := counters(t, reg)
	want := []string{
		`kvgate_engine_cached_tokens_total{engine="engine-0"} 25`, // 0+2+4+6+8 reported, 5 late
		`kvgate_engine_cached_tokens_total{engine="engine-1"} 30`, // 1+3+5+7+9, 5 late
		`kvgate_engine_prompt_tokens_total{engine="engine-0"} 50`,
		`kvgate_engine_prompt_tokens_total{engine="engine-1"} 50`,
		`kvgate_requests_total{path="/health",status="200"} 2`,
		`kvgate_requests_total{path="/v1/chat/completions",status="200"} 5`,
		`kvgate_requests_total{path="/v1/completions",status="200"} 30`,
		`kvgate_requests_total{path="/v1/completions",status="429"} 3`,
		`kvgate_requests_total{path="/v1/messages",status="599"} 1`,
		`kvgate_requests_total{path="/v1/messages",status="600"} 2`,
		`kvgate_requests_total{path="/v1/messages",status="99"} 1`,
		`kvgate_requests_total{path="other",status="404"} 5`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("counters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// counters lists reg's labelled counters as name{labels} value, sorted.
func counters(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if mt.GetCounter() == nil || len(mt.GetLabel()) == 0 {
				continue
			}
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(ls, ","), mt.GetCounter().GetValue()))
		}
	}
	sort.Strings(out)
	return out
}
