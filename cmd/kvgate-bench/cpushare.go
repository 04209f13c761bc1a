package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/kvgate/kvgate/perf/cpustat"
)

// cpuShare is how busy the machine was during one policy's run, and how
// much of that was the benchmark's own processes: on a shared machine the
// rest is the noise its latencies carry.
type cpuShare struct {
	// CPUs is the machine's count; Own and Others are average cores busy
	// with the benchmark's processes (kvgate-bench, the routers and, when
	// it started them, the engines) and with everything else.
	CPUs   int     `json:"cpus"`
	Own    float64 `json:"own_cores"`
	Others float64 `json:"other_cores"`
	// EnginesOwn says whether the engines count as own.
	EnginesOwn bool `json:"engines_own"`
}

// cpuMeter takes the two readings of a cpuShare.
type cpuMeter struct {
	pids            []int
	machine, own    float64
	start           time.Time
	enginesIncluded bool
}

// startCPU reads the machine's and pids' CPU time now; kvgate-bench itself
// is added to pids.
func startCPU(pids []int, enginesIncluded bool) *cpuMeter {
	m := &cpuMeter{pids: append([]int{os.Getpid()}, pids...), enginesIncluded: enginesIncluded}
	m.machine, m.own, m.start = cpustat.Machine(), m.ownNow(), time.Now()
	return m
}

func (m *cpuMeter) ownNow() float64 {
	var s float64
	for _, p := range m.pids {
		s += cpustat.Process(p)
	}
	return s
}

// stop is the share since startCPU.
func (m *cpuMeter) stop() *cpuShare {
	wall := time.Since(m.start).Seconds()
	own := m.ownNow() - m.own
	busy := cpustat.Machine() - m.machine
	return &cpuShare{CPUs: runtime.NumCPU(), Own: own / wall, Others: max(busy-own, 0) / wall, EnginesOwn: m.enginesIncluded}
}

func (c *cpuShare) print(w io.Writer) {
	whose := "kvgate-bench and kvgate"
	if c.EnginesOwn {
		whose = "kvgate-bench, kvgate and the engines"
	}
	fmt.Fprintf(w, "    CPU over the run: %s %.2f cores, everything else (other processes, steal) %.2f cores, of %d\n", whose, c.Own, c.Others, c.CPUs)
}
