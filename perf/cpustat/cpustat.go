// Package cpustat reads CPU time from /proc, for benchmarks that charge
// work to a process or to the whole machine.
package cpustat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the kernel's clock tick for /proc times (USER_HZ).
const userHZ = 100

// Process returns a process's user + system CPU seconds (0 if unreadable).
func Process(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / userHZ
}

// Machine returns the busy CPU seconds of all cores (everything but idle
// and iowait), including softirq and kernel threads no process is charged.
func Machine() float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	var busy float64
	for i, v := range strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 {
			busy += x
		}
	}
	return busy / userHZ
}
