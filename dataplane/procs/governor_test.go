package procs

import (
	"context"
	"io"
	"log/slog"
	"math"
	"runtime/metrics"
	"testing"
	"time"
)

var (
	loaded    = Sample{Idle: 0.25, Wait: 200 * time.Microsecond, Waits: 900, Busy: 1.4} // short requests, CPUs idle
	saturated = Sample{Idle: 0.01, Wait: 300 * time.Microsecond, Waits: 5000, Busy: 1.0}
	quiet     = Sample{Idle: 0.97, Wait: 5 * time.Microsecond, Waits: 3, Busy: 0.01}
	fast      = Sample{Idle: 0.30, Wait: 10 * time.Microsecond, Waits: 800, Busy: 1.0} // idle, but nobody waits
)

func TestGovernorObserve(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []Sample
		want    []bool // spare after each sample
	}{
		{"on after three loaded samples in a row", []Sample{loaded, loaded, loaded, loaded},
			[]bool{false, false, true, true}},
		{"a run broken starts again", []Sample{loaded, loaded, fast, loaded, loaded, loaded},
			[]bool{false, false, false, false, false, true}},
		{"idle CPUs nobody waits for: no spare Ps", []Sample{fast, fast, fast, fast}, []bool{false, false, false, false}},
		{"saturated: no spare Ps", []Sample{saturated, saturated, saturated}, []bool{false, false, false}},
		{"no load: no spare Ps", []Sample{quiet, quiet, quiet}, []bool{false, false, false}},
		{"off after two saturated samples in a row", []Sample{loaded, loaded, loaded, saturated, loaded, saturated, saturated},
			[]bool{false, false, true, true, true, true, false}},
		{"off after ten quiet samples in a row", append([]Sample{loaded, loaded, loaded}, repeat(quiet, 10)...),
			append([]bool{false, false, true}, append(repeatBool(true, 9), false)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sets []int
			g := &Governor{extra: 5, set: func(n int) { sets = append(sets, n) }}
			for i, s := range c.samples {
				if want := g.observe(s); want != g.spare.Load() {
					g.switchTo(want)
				}
				if got := g.Spare(); got != c.want[i] {
					t.Fatalf("after sample %d: spare %v, want %v", i, got, c.want[i])
				}
			}
			for i, n := range sets { // alternately on (extra) and off (the default)
				if want := []int{5, 0}[i%2]; n != want {
					t.Errorf("change %d set %d, want %d", i, n, want)
				}
			}
			if g.Changes() != uint64(len(sets)) {
				t.Errorf("Changes %d, want %d", g.Changes(), len(sets))
			}
		})
	}
}

func repeat(s Sample, n int) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func repeatBool(b bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestGovernorRun: Run follows its samples, and gives the spare Ps back
// when its context ends.
func TestGovernorRun(t *testing.T) {
	samples := make(chan Sample)
	sets := make(chan int, 4)
	g := &Governor{extra: 7, interval: time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sampler: func() (Sample, error) { return <-samples, nil }, set: func(n int) { sets <- n }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	for range onAfter {
		samples <- loaded
	}
	if n := <-sets; n != 7 {
		t.Fatalf("set %d, want 7", n)
	}
	cancel()
	go func() { // Run may be waiting for a sample when it sees ctx end
		for {
			select {
			case samples <- loaded:
			case <-done:
				return
			}
		}
	}()
	<-done
	if n := <-sets; n != 0 {
		t.Fatalf("at the end set %d, want 0 (the default)", n)
	}
	if g.Spare() {
		t.Fatal("spare Ps still in use after Run")
	}
}

func TestParseStat(t *testing.T) {
	// The first lines of a 2-CPU VM's /proc/stat.
	const stat = "cpu  10132153 290696 3084719 46828483 16683 0 25195 7 0 0\n" +
		"cpu0 1393280 32966 572823 8114720 2442 0 5963 3 0 0\nintr 1 2 3\n"
	idle, total, err := parseStat([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(46828483 + 16683); idle != want {
		t.Errorf("idle %d, want %d", idle, want)
	}
	if want := uint64(10132153 + 290696 + 3084719 + 46828483 + 16683 + 0 + 25195 + 7); total != want {
		t.Errorf("total %d, want %d", total, want)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestSamplerWaits(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 100e-6, 300e-6, math.Inf(1)},
		Counts:  []uint64{0, 10, 0, 1},
	}
	var s sampler
	if w, n := s.waits(h); w != 0 || n != 0 {
		t.Fatalf("first call: %v %d, want nothing (it only sets the totals)", w, n)
	}
	h.Counts = []uint64{0, 12, 2, 1} // two waits of about 50 us, two of about 200 us
	w, n := s.waits(h)
	if n != 4 || w != 125*time.Microsecond {
		t.Fatalf("waits %v over %d, want 125us over 4", w, n)
	}
	h.Counts = []uint64{0, 12, 2, 3} // two past the last edge, taken at it
	if w, n := s.waits(h); n != 2 || w != 300*time.Microsecond {
		t.Fatalf("waits %v over %d, want 300us over 2", w, n)
	}
}

// TestSamplerReal reads this machine's counters (Linux).
func TestSamplerReal(t *testing.T) {
	s, err := newSampler()
	if err != nil {
		t.Skip("no /proc/stat here:", err)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // some CPU for Busy to see
	}
	smp, err := s.sample()
	if err != nil {
		t.Fatal(err)
	}
	if smp.Idle < 0 || smp.Idle > 1 || smp.Busy <= 0 {
		t.Fatalf("sample %+v: idle outside [0, 1] or no CPU counted", smp)
	}
}
