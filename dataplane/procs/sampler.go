package procs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sampler reads the governor's inputs and turns their running totals into
// one interval's Sample.
type sampler struct {
	stat      func() ([]byte, error) // /proc/stat's contents
	prevIdle  uint64                 // the machine's idle ticks so far
	prevTotal uint64                 // and all its ticks
	lat       []metrics.Sample
	prevLat   []uint64 // the latency histogram's counts so far
	prevCPU   time.Duration
	prevAt    time.Time
}

const schedLatencies = "/sched/latencies:seconds"

func newSampler() (*sampler, error) {
	s := &sampler{stat: func() ([]byte, error) { return os.ReadFile("/proc/stat") }}
	s.lat = []metrics.Sample{{Name: schedLatencies}}
	if _, err := s.sample(); err != nil { // the totals to count from
		return nil, err
	}
	return s, nil
}

// sample returns what changed since the last call.
func (s *sampler) sample() (Sample, error) {
	var out Sample
	b, err := s.stat()
	if err != nil {
		return out, err
	}
	idle, total, err := parseStat(b)
	if err != nil {
		return out, err
	}
	if dt := total - s.prevTotal; s.prevTotal != 0 && total > s.prevTotal {
		out.Idle = float64(idle-s.prevIdle) / float64(dt)
	}
	s.prevIdle, s.prevTotal = idle, total

	metrics.Read(s.lat)
	if s.lat[0].Value.Kind() == metrics.KindFloat64Histogram {
		out.Wait, out.Waits = s.waits(s.lat[0].Value.Float64Histogram())
	}

	now := time.Now()
	cpu, err := processCPU()
	if err != nil {
		return out, err
	}
	if !s.prevAt.IsZero() {
		out.Busy = float64(cpu-s.prevCPU) / float64(now.Sub(s.prevAt))
	}
	s.prevCPU, s.prevAt = cpu, now
	return out, nil
}

// waits returns the mean and the number of the waits the histogram
// counted since the last call, each taken at its bucket's middle (the
// open-ended buckets at their finite edge).
func (s *sampler) waits(h *metrics.Float64Histogram) (time.Duration, uint64) {
	if len(s.prevLat) != len(h.Counts) {
		s.prevLat = make([]uint64, len(h.Counts))
		copy(s.prevLat, h.Counts)
		return 0, 0
	}
	var n uint64
	var sum float64
	for i, c := range h.Counts {
		d := c - s.prevLat[i]
		s.prevLat[i] = c
		if d == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		mid := (lo + hi) / 2
		switch {
		case math.IsInf(lo, -1):
			mid = max(hi, 0)
		case math.IsInf(hi, 1):
			mid = lo
		}
		n += d
		sum += float64(d) * mid
	}
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(n) * 1e9), n
}

// parseStat reads the machine's idle and total CPU ticks from /proc/stat's
// "cpu" line (user nice system idle iowait irq softirq steal guest
// guest_nice; guest time is inside user time and not added again). iowait
// counts as idle.
func parseStat(b []byte) (idle, total uint64, err error) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return idle, total, nil
}

// processCPU is the process's user and system CPU time so far.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
