//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/cpustat"
)

// rawEngine is an HTTP engine fast enough not to be the bottleneck: a
// POST whose body says "sse" gets a chunked stream of events of 128 bytes,
// written one by one; any other POST a body of bodySize bytes with
// Content-Length; GET /v1/models the model list.
func rawEngine(b *testing.B, bodySize, events int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MB
	event := []byte(fmt.Sprintf("%x\r\ndata: %s\n\n\r\n", 128, strings.Repeat("x", 120)))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				length := 0
				for {
					h, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if h == "\r\n" {
						break
					}
					if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length:"); ok {
						length, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
				body := make([]byte, length)
				if _, err := io.ReadFull(r, body); err != nil {
					return
				}
				switch {
				case strings.HasPrefix(line, "GET /v1/models"):
					m := fmt.Sprintf(`{"data":[{"id":%q}]}`, model)
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(m), m)
				case bytes.Contains(body, []byte(`"sse"`)):
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
					for range events {
						if _, err := c.Write(event); err != nil {
							return
						}
					}
					fmt.Fprint(c, "0\r\n\r\n")
				default:
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", bodySize)
					for left := bodySize; left > 0; left -= len(payload) {
						if _, err := c.Write(payload[:min(left, len(payload))]); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// BenchmarkPassthroughSteering: responses from an HTTP engine through a
// kvgate process in each steering mode, side by side: 64 MB bodies and SSE
// streams of 100,000 events of 128 bytes. Reports throughput, kvgate's CPU
// per GB and the whole machine's CPU per GB (in sockmap mode the kernel
// moves bytes in softirq and kworker context, outside kvgate's own time).
//
//	go test -tags e2e -run '^$' -bench PassthroughSteering -benchtime 5x ./perf/e2e
func BenchmarkPassthroughSteering(b *testing.B) {
	bodySize, events := 64<<20, 100_000
	engine := rawEngine(b, bodySize, events)
	for _, kind := range []string{"body", "sse"} {
		for _, mode := range []string{"sockmap", "splice", "copy"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				if mode == "sockmap" {
					requireSockmap(b)
				}
				p := start(b, "kvgate", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--http-engine", engine, "--steering", mode)
				base := "http://" + p.waitLog(b, "kvgate listening")["addr"].(string)
				per := int64(bodySize)
				if kind == "sse" {
					per = int64(events) * int64(len(fmt.Sprintf("%x\r\ndata: %s\n\n\r\n", 128, strings.Repeat("x", 120))))
				}
				client := &http.Client{Timeout: 10 * time.Minute}
				buf := make([]byte, 1<<20)
				req := fmt.Sprintf(`{"model":%q,"prompt":"benchmark","max_tokens":4,"user":%q}`, model, kind)
				proc0, mach0 := cpustat.Process(p.cmd.Process.Pid), cpustat.Machine()
				t0 := time.Now()
				b.ResetTimer()
				var got int64
				for range b.N {
					resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(req))
					if err != nil {
						b.Fatal(err)
					}
					for {
						n, err := resp.Body.Read(buf)
						got += int64(n)
						if err != nil {
							break
						}
					}
					resp.Body.Close()
				}
				b.StopTimer()
				wall, gb := time.Since(t0).Seconds(), float64(got)/1e9
				if kind == "body" && got != per*int64(b.N) {
					b.Fatalf("%d of %d bytes", got, per*int64(b.N))
				}
				b.ReportMetric(gb*1e3/wall, "MB/s")
				b.ReportMetric((cpustat.Process(p.cmd.Process.Pid)-proc0)/gb, "kvgate-cpu-s/GB")
				b.ReportMetric((cpustat.Machine()-mach0)/gb, "machine-cpu-s/GB")
			})
		}
	}
}
