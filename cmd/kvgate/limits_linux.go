package main

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// checkLimits logs the operating-system limits that cap a busy router, with
// what to raise (README, "Tuning").
func checkLimits(log *slog.Logger) {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 65536 {
		log.Warn("open files limit is low: each client and engine is a socket", "nofile", rl.Cur, "raise_to", 1048576, "how", "ulimit -n or LimitNOFILE=")
	}
	checks := []struct {
		path string
		min  int
	}{
		{"/proc/sys/net/core/somaxconn", 4096},
		{"/proc/sys/net/core/rmem_max", 4 << 20},
		{"/proc/sys/net/core/wmem_max", 4 << 20},
	}
	for _, c := range checks {
		if v, ok := readInt(c.path); ok && v < c.min {
			log.Warn("kernel limit is low", "sysctl", sysctlName(c.path), "value", v, "raise_to", c.min)
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			lo, _ := strconv.Atoi(f[0])
			hi, _ := strconv.Atoi(f[1])
			if hi-lo < 20000 {
				log.Warn("local port range is narrow for many upstream connections", "range", strings.TrimSpace(string(b)), "suggest", "1024 65535")
			}
		}
	}
}

func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return v, err == nil
}

func sysctlName(path string) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", ".")
}
