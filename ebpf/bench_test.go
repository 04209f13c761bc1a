package ebpf

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/cpustat"
)

// TestHelperProxy is the steering proxy as its own process, for the
// benchmark to measure its CPU apart from the upstream's and the client's.
// It runs only when the benchmark starts it.
func TestHelperProxy(t *testing.T) {
	mode, up := os.Getenv("KVGATE_STEER_MODE"), os.Getenv("KVGATE_STEER_UPSTREAM")
	if mode == "" {
		t.Skip("started by BenchmarkSteer only")
	}
	s, err := Open(mode, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, _ := proxy(t, s, up)
	fmt.Println("proxy", addr)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
}

// sseUpstream answers every request with a close-delimited stream of
// events, one write each, as an engine streams tokens.
func sseUpstream(b *testing.B, events, size int) string {
	ev := []byte("data: " + strings.Repeat("x", size-8) + "\n\n")
	return serveEach(b, func(c net.Conn) {
		if _, err := c.Read(make([]byte, 4096)); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"))
		for range events {
			if _, err := c.Write(ev); err != nil {
				return
			}
		}
	})
}

// BenchmarkSteer measures response throughput and CPU through a steering
// proxy process for each mode: large bodies (64 MB, Content-Length) and
// long SSE streams (100,000 events of 128 bytes, one write each). CPU is
// the proxy process's (user + system) per GB, and the whole machine's per
// GB: redirected bytes are moved in softirq and kworker context, which the
// proxy's own accounting does not see.
func BenchmarkSteer(b *testing.B) {
	bodySize, events := 64<<20, 100_000
	if testing.Short() {
		bodySize, events = 4<<20, 5_000
	}
	for _, kind := range []string{"body", "sse"} {
		for _, mode := range Modes {
			b.Run(fmt.Sprintf("%s/%s", kind, mode), func(b *testing.B) {
				if mode == ModeSockmap {
					requireSockmap(b) // the proxy process loads it
				}
				var up, path string
				var per int64
				if kind == "body" {
					bodies.LoadOrStore([2]int{1, bodySize}, body(1, bodySize)) // made before the clock starts
					up, path, per = upstream(b), fmt.Sprintf("/1/%d", bodySize), int64(bodySize)
				} else {
					up, path, per = sseUpstream(b, events, 128), "/sse", int64(events*128)
				}
				benchProxy(b, mode, up, path, kind == "sse", per)
			})
		}
	}
}

func benchProxy(b *testing.B, mode Mode, up, path string, closeDelimited bool, per int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProxy$", "-test.v")
	cmd.Env = append(os.Environ(), "KVGATE_STEER_MODE="+string(mode), "KVGATE_STEER_UPSTREAM="+up)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "proxy "); ok {
			addr = a
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if addr == "" {
		b.Fatal("the proxy process did not start")
	}
	var c net.Conn
	dial := func() {
		var err error
		if c, err = net.Dial("tcp", addr); err != nil {
			b.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Minute))
	}
	dial()
	buf := make([]byte, 256<<10)
	proc0, mach0 := cpustat.Process(cmd.Process.Pid), cpustat.Machine()
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		if closeDelimited && c == nil {
			dial()
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\n\r\n", path)
		r := bufio.NewReaderSize(c, 256<<10)
		var n int64
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
		}
		for n < per {
			k, err := r.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		if n != per {
			b.Fatalf("%d of %d bytes", n, per)
		}
		if closeDelimited {
			c.Close()
			c = nil
		}
	}
	b.StopTimer()
	wall := time.Since(start).Seconds()
	gb := float64(per) * float64(b.N) / 1e9
	b.ReportMetric(gb*1e3/wall, "MB/s")
	b.ReportMetric((cpustat.Process(cmd.Process.Pid)-proc0)/gb, "proxy-cpu-s/GB")
	b.ReportMetric((cpustat.Machine()-mach0)/gb, "machine-cpu-s/GB")
	if c != nil {
		c.Close()
	}
}
