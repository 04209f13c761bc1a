package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCompletionRequest is proxybench's request in this process: a
// non-streamed 1-token /v1/completions on one keep-alive connection, its
// response read by hand. ns/op is a request's round trip; cpu-ns/op,
// B/op and allocs/op are the whole process's per request: the client, the
// gateway and its two zero-cost engines.
func BenchmarkCompletionRequest(b *testing.B) { benchCompletion(b, 1) }

// BenchmarkCompletionRequest16 is the same request with max_tokens 16
// (proxybench's other size): against BenchmarkCompletionRequest, what 15
// more tokens of a non-streamed answer cost.
func BenchmarkCompletionRequest16(b *testing.B) { benchCompletion(b, 16) }

func benchCompletion(b *testing.B, maxTokens int) {
	roundTrip := completionClientOf(b, maxTokens)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		roundTrip()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// completionClient starts a gateway with two zero-cost engines and
// returns one round trip of proxybench's 1-token request to it, warmed up
// (pools and the engines' caches filled).
func completionClient(tb testing.TB) func() { return completionClientOf(tb, 1) }

// completionClientOf is completionClient for a request of maxTokens
// tokens (ignore_eos, so that many are generated).
func completionClientOf(tb testing.TB, maxTokens int) func() {
	tg := startGatewayWith(tb, gwOptions{})
	body := `{"model":"` + model + `","prompt":"hello there, how are you","max_tokens":` + strconv.Itoa(maxTokens) +
		`,"ignore_eos":true}`
	req := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	c, err := net.Dial("tcp", tg.base[len("http://"):])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	r := bufio.NewReaderSize(c, 4096)
	resp := make([]byte, 0, 4096)
	roundTrip := func() {
		if _, err := c.Write(req); err != nil {
			tb.Fatal(err)
		}
		n := -1
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				tb.Fatal(err)
			}
			if len(line) == 2 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		if n < 0 {
			tb.Fatal("no Content-Length")
		}
		if n > cap(resp) {
			resp = make([]byte, n)
		}
		resp = resp[:n]
		if _, err := io.ReadFull(r, resp); err != nil {
			tb.Fatal(err)
		}
		if !bytes.Contains(resp, []byte(`"choices"`)) {
			tb.Fatalf("not a completion: %s", resp)
		}
	}
	for range 100 { // warm: pools, the engines' caches
		roundTrip()
	}
	return roundTrip
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
