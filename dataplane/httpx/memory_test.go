package httpx

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var memConns = flag.Int("httpx.memconns", 500, "connections (and streams) TestMemoryPerConnection opens; 10000 for the written-down figure")

// rawClient is a client socket held as a bare descriptor, so that the
// clients add nothing to this process's heap but a slice of ints.
type rawClient int

func dialRaw(t *testing.T, addr string) rawClient {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	var sa syscall.SockaddrInet4
	sa.Addr = [4]byte{127, 0, 0, 1}
	for _, c := range port {
		sa.Port = sa.Port*10 + int(c-'0')
	}
	if err := syscall.Connect(fd, &sa); err != nil {
		t.Fatal(err)
	}
	return rawClient(fd)
}

func (c rawClient) send(t *testing.T, s string) {
	t.Helper()
	if _, err := syscall.Write(int(c), []byte(s)); err != nil {
		t.Fatal(err)
	}
}

// readUntil reads until what arrived contains want.
func (c rawClient) readUntil(t *testing.T, want string) {
	t.Helper()
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), want) {
		n, err := syscall.Read(int(c), buf)
		if err != nil || n == 0 {
			t.Fatalf("read %q, then %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
}

// liveBytes is the heap in use plus goroutine stacks, after a collection.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// streamHold is a handler that starts a stream, sends one event and holds
// the response open until release is closed.
type streamHold struct {
	started sync.WaitGroup
	mu      sync.Mutex // the handlers' reads of release are ordered with the test's writes only through sockets
	release chan struct{}
}

func (h *streamHold) hold() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release = make(chan struct{})
	return h.release
}

func (h *streamHold) waitRelease() {
	h.mu.Lock()
	ch := h.release
	h.mu.Unlock()
	<-ch
}

func (h *streamHold) ServeHTTP(w *ResponseWriter, r *Request) {
	if r.Path == "/idle" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
		_ = w.Finish()
		return
	}
	_ = w.Stream(200)
	_ = w.Chunk([]byte("data: {\"token\":1}\n\n"))
	h.started.Done()
	h.waitRelease()
	_ = w.Finish()
}

// TestMemoryPerConnection measures what the server holds per idle
// keep-alive connection (one request served, then waiting) and per
// streamed response in flight, with -httpx.memconns of each, and that it
// all goes when they close, three times over. The clients are bare sockets in a
// child process (this test binary again, TestMemoryClients), so they cost
// this process nothing and their descriptors count against the child's
// limit. It logs the figures; the bounds it checks are loose, since the
// collector's timing varies.
func TestMemoryPerConnection(t *testing.T) {
	n := *memConns
	raiseFileLimit(t, n+256)
	h := &streamHold{}
	s := serveT(t, Config{MaxConns: n + 16}, h)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryClients$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("HTTPX_MEM_CLIENTS=%s,%d", s.Addr(), n))
	toChild, _ := cmd.StdinPipe()
	fromChild, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(fromChild)
	step := func(say, want string) {
		t.Helper()
		if say != "" {
			_, _ = io.WriteString(toChild, say+"\n")
		}
		for lines.Scan() {
			if lines.Text() == want {
				return
			}
		}
		t.Fatalf("the client process ended before %q", want)
	}
	base := liveBytes()
	var lastAfter uint64
	for round := range 3 {
		step("idle", "idle")
		checkFor(t, time.Minute, func() bool { return s.Conns() == n })
		idle := liveBytes()
		release := h.hold()
		h.started.Add(n)
		step("stream", "streams sent")
		h.started.Wait()
		streaming := liveBytes()
		close(release)
		step("", "closed")
		checkFor(t, time.Minute, func() bool { return s.Active() == 0 && s.Conns() == 0 })
		after := liveBytes()
		perIdle := float64(int64(idle)-int64(base)) / float64(n)
		perStream := float64(int64(streaming)-int64(idle)) / float64(n)
		t.Logf("round %d, %d connections: %.0f bytes per idle keep-alive connection, %.0f more per stream in flight; live %d before, %d after closing (%+d)",
			round, n, perIdle, perStream, base, after, int64(after)-int64(base))
		if raceEnabled {
			continue
		}
		if perIdle > 64<<10 || perStream > 64<<10 {
			t.Errorf("%.0f bytes per idle connection, %.0f per stream", perIdle, perStream)
		}
		// What stays is high water, not a leak: the runtime keeps every
		// goroutine descriptor it ever made for reuse, the connection
		// tables (Server.conns, gnet's matrix) keep their size, and up to
		// maxIdleWorkers handler goroutines wait for work; a second round
		// must not add to it.
		if residual := int64(after) - int64(base); residual > int64(n)*1024+maxIdleWorkers*16<<10+1<<20 {
			t.Errorf("%d bytes still held after every connection closed", residual)
		}
		if round > 0 && after > lastAfter+lastAfter/10 {
			t.Errorf("live after closing grew from %d to %d over a round", lastAfter, after)
		}
		lastAfter = after
	}
	_ = toChild.Close()
}

// TestMemoryClients is TestMemoryPerConnection's client process: on
// "idle" it opens its connections and has one request served on each, on
// "stream" it starts a stream on each, reads them to their end and
// closes every connection.
func TestMemoryClients(t *testing.T) {
	addr, count, ok := strings.Cut(os.Getenv("HTTPX_MEM_CLIENTS"), ",")
	if !ok {
		t.Skip("run by TestMemoryPerConnection")
	}
	n, _ := strconv.Atoi(count)
	raiseFileLimit(t, n+64)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "idle" {
			continue
		}
		clients := make([]rawClient, 0, n)
		for range n {
			c := dialRaw(t, addr)
			c.send(t, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
			c.readUntil(t, "\r\n\r\nok")
			clients = append(clients, c)
		}
		fmt.Println("idle")
		in.Scan()
		for _, c := range clients {
			c.send(t, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		fmt.Println("streams sent")
		for _, c := range clients {
			c.readUntil(t, "0\r\n\r\n")
			syscall.Close(int(c))
		}
		fmt.Println("closed")
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE to at least want, or skips.
func raiseFileLimit(t *testing.T, want int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	if lim.Cur >= uint64(want) {
		return
	}
	lim.Cur = max(lim.Cur, uint64(want))
	lim.Max = max(lim.Max, lim.Cur)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d descriptors: %v", want, err)
	}
}

// TestMaxConns: a connection past MaxConns is answered 503 and closed;
// once one closes, a new one is served.
func TestMaxConns(t *testing.T) {
	h := &streamHold{}
	s := serveT(t, Config{MaxConns: 2}, h)
	a, b := dialT(t, s), dialT(t, s)
	checkFor(t, 30*time.Second, func() bool { return s.Conns() == 2 })
	over := dialT(t, s)
	got, _ := io.ReadAll(over)
	if !strings.HasPrefix(string(got), "HTTP/1.1 503 ") {
		t.Fatalf("past MaxConns: %q", got)
	}
	a.Close()
	checkFor(t, 30*time.Second, func() bool { return s.Conns() == 1 })
	for _, c := range []net.Conn{b, dialT(t, s)} {
		_, _ = io.WriteString(c, get("/idle"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("under MaxConns: %v, %v", resp, err)
		}
	}
}
