package httpx

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ownChunk is the chunk a /stream/ID handler writes over and over, in the
// chunked encoding: a client can tell every byte of its stream from
// anyone else's.
func ownChunk(id int) string { return fmt.Sprintf("a\r\n[%08d]\r\n", id) }

// ownBody is the body of a /whole/ID response.
func ownBody(id int) string { return strings.Repeat(fmt.Sprintf("<%08d>", id), 40) }

// writeUntilGone serves /stream/ID by writing ownChunk until the client is
// gone, and /whole/ID by one whole response; an error other than
// ErrClientGone is counted in bad.
func writeUntilGone(bad *atomic.Int64) Handler {
	return handlerFunc(func(w *ResponseWriter, r *Request) {
		var id int
		if _, err := fmt.Sscanf(r.Path[strings.LastIndexByte(r.Path, '/')+1:], "%d", &id); err != nil {
			w.WriteHeader(400)
			_ = w.Finish()
			return
		}
		if strings.HasPrefix(r.Path, "/whole/") {
			if err := w.FinishBody(200, []byte(ownBody(id))); err != nil && !errors.Is(err, ErrClientGone) {
				bad.Add(1)
			}
			return
		}
		err := w.Stream(200)
		payload := []byte(fmt.Sprintf("[%08d]", id))
		for err == nil {
			err = w.Chunk(payload)
		}
		if !errors.Is(err, ErrClientGone) {
			bad.Add(1)
		}
		_ = w.Finish()
	})
}

// checkOwn reads up to limit bytes of connection id's response and
// reports the first byte that is not its own.
func checkOwn(c net.Conn, id int, stream bool, limit int) error {
	head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	unit := ownChunk(id)
	if !stream {
		head = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(ownBody(id)))
		unit = ownBody(id)
		limit = len(head) + len(unit)
	}
	got := make([]byte, limit)
	n, err := io.ReadFull(c, got)
	got = got[:n]
	for i, b := range got {
		want := byte(0)
		if i < len(head) {
			want = head[i]
		} else {
			want = unit[(i-len(head))%len(unit)]
		}
		if b != want {
			return fmt.Errorf("connection %d: byte %d is %q (%.40q), not its own", id, i, b, got[i:])
		}
	}
	if !stream && err != nil {
		return fmt.Errorf("connection %d: %v after %d bytes", id, err, n)
	}
	return nil
}

// TestDirectWritesStayOnTheirConnection: thousands of short connections
// open and close while handlers write to them straight from their
// goroutines, so the server keeps closing sockets whose descriptors the
// next accepted connection reuses at once. Every byte a client reads must
// be its own (a write to a closed connection's descriptor would land on
// another client), every handler must see its client gone as
// ErrClientGone, and every request must end. Without the closed check
// under the write lock (direct.go) foreign bytes show up here.
func TestDirectWritesStayOnTheirConnection(t *testing.T) {
	total := 2000
	if testing.Short() || raceEnabled {
		total = 500
	}
	var bad atomic.Int64
	cfg := DefaultConfig()
	cfg.MaxPendingWrite = 32 << 10 // a stream whose client stopped reading is cut off soon
	s := serveT(t, cfg, writeUntilGone(&bad))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(next.Load()), 7))
			for {
				id := int(next.Add(1))
				if id > total {
					return
				}
				c, err := net.Dial("tcp", s.Addr())
				if err != nil {
					errs <- err
					return
				}
				_ = c.SetDeadline(time.Now().Add(60 * time.Second))
				stream := id%2 == 0
				path := fmt.Sprintf("/whole/%d", id)
				if stream {
					path = fmt.Sprintf("/stream/%d", id)
				}
				_, err = io.WriteString(c, get(path))
				switch {
				case err != nil:
				case id%3 == 0: // gone before its response: the handler writes to a closing socket
				default:
					err = checkOwn(c, id, stream, 64+rng.IntN(4096))
				}
				if tc, ok := c.(*net.TCPConn); ok && id%5 == 0 {
					_ = tc.SetLinger(0) // a reset, not a FIN: the handler's next write fails at once
				}
				c.Close()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitIdle(t, s)
	if n := bad.Load(); n > 0 {
		t.Errorf("%d handlers saw an error other than ErrClientGone", n)
	}
}

// TestDirectWriteAfterPeerClose: a client that reads the head of its
// stream and resets the connection leaves its handler's next writes
// failing with ErrClientGone, never blocking or succeeding forever, and
// the next client is served whole.
func TestDirectWriteAfterPeerClose(t *testing.T) {
	var bad atomic.Int64
	s := serveT(t, DefaultConfig(), writeUntilGone(&bad))
	for id := 1; id <= 20; id++ {
		c := dialT(t, s)
		if _, err := io.WriteString(c, get(fmt.Sprintf("/stream/%d", id))); err != nil {
			t.Fatal(err)
		}
		if err := checkOwn(c, id, true, 200); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		waitIdle(t, s)
		after := dialT(t, s)
		if _, err := io.WriteString(after, get(fmt.Sprintf("/whole/%d", 1000+id))); err != nil {
			t.Fatal(err)
		}
		if err := checkOwn(after, 1000+id, false, 0); err != nil {
			t.Fatal(err)
		}
		after.Close()
	}
	waitIdle(t, s)
	if n := bad.Load(); n > 0 {
		t.Errorf("%d handlers saw an error other than ErrClientGone", n)
	}
}

// TestDirectWriteAfterCloseMissesReusedSocket: a handler whose write was
// admitted while its client was there, and whose client then left, must
// not reach the connection accepted next on the same descriptor number
// (POSIX hands out the lowest free one). The handler stops between
// admitting its chunk and taking the write lock until its connection is
// closed and the descriptor is a new connection's; the new client must
// read only its own response, and the handler's next write fail with
// ErrClientGone. Without the closed check under the write lock the late
// chunk arrives on the new connection.
func TestDirectWriteAfterCloseMissesReusedSocket(t *testing.T) {
	inWindow, proceed, late := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	s := serveT(t, DefaultConfig(), handlerFunc(func(w *ResponseWriter, r *Request) {
		if r.Path != "/late" {
			_ = w.FinishBody(200, []byte(ownBody(2)))
			return
		}
		err := w.Stream(200)
		hook := func() { close(inWindow); <-proceed }
		beforeWriteLock.Store(&hook)
		if err == nil {
			err = w.Chunk([]byte("late"))
		}
		beforeWriteLock.Store(nil)
		if err == nil {
			err = w.Chunk([]byte("later"))
		}
		late <- err
		_ = w.Finish()
	}))
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release) // before the server's cleanup, which waits for the handler
	a := dialT(t, s)
	if _, err := io.WriteString(a, get("/late")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a, make([]byte, len("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))); err != nil {
		t.Fatal(err)
	}
	<-inWindow
	fd := onlyConnFD(t, s)
	b, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0) // made while fd is taken, so the next accept can get it
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	checkFor(t, 30*time.Second, func() bool { // gnet closes the socket after OnClose
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		return errno == syscall.EBADF
	})
	freeOnly(t, fd)
	connectRaw(t, b, s.Addr())
	checkFor(t, 30*time.Second, func() bool { return s.Conns() == 1 })
	if got := onlyConnFD(t, s); got != fd {
		t.Fatalf("the new connection got descriptor %d, not the closed one's %d", got, fd)
	}
	bc := connOf(t, b)
	release()
	if err := <-late; !errors.Is(err, ErrClientGone) {
		t.Errorf("a write after the client left returned %v, want ErrClientGone", err)
	}
	if _, err := io.WriteString(bc, get("/whole/2")); err != nil {
		t.Fatal(err)
	}
	if err := checkOwn(bc, 2, false, 0); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
}

// freeOnly makes fd the lowest free descriptor until the test ends, by
// taking every lower free one.
func freeOnly(t *testing.T, fd int) {
	t.Helper()
	for {
		p, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p == fd {
			syscall.Close(p)
			return
		}
		t.Cleanup(func() { syscall.Close(p) })
		if p > fd {
			t.Fatalf("descriptor %d taken again before the test could reuse it", fd)
		}
	}
}

// onlyConnFD returns the descriptor of s's one connection.
func onlyConnFD(t *testing.T, s *Server) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(s.conns))
	}
	for st := range s.conns {
		return st.fd
	}
	return -1
}

// connectRaw connects the bare socket fd to addr.
func connectRaw(t *testing.T, fd int, addr string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		t.Fatal(err)
	}
}

// connOf returns the connected socket fd as a net.Conn, on a duplicate:
// fd itself is closed.
func connOf(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "client")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

// wholeBody is response i's body: large enough that a write of it fills
// the socket, different for every response.
func wholeBody(i int) string {
	return strings.Repeat(fmt.Sprintf("%03d-", i), 40<<10)
}

// TestWholeResponsesInOrderAcrossWays: pipelined whole responses, each
// larger than the socket takes at once, to clients that read as fast as
// they can: a response's first bytes leave directly, its rest through the
// loop, and the next response must wait for that rest, however the
// socket drains. Without the in-flight and outbound checks in direct a
// later response's bytes overtake an earlier one's rest.
func TestWholeResponsesInOrderAcrossWays(t *testing.T) {
	const conns, pipelined = 8, 6
	cfg := DefaultConfig()
	cfg.SocketSendBuffer = 16 << 10
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		var i int
		_, _ = fmt.Sscanf(r.Path, "/%d", &i)
		_ = w.FinishBody(200, []byte(wholeBody(i)))
	}))
	var want, reqs strings.Builder
	for i := range pipelined {
		body := wholeBody(i)
		fmt.Fprintf(&want, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		reqs.WriteString(get(fmt.Sprintf("/%d", i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		c := dialT(t, s)
		wg.Go(func() {
			if _, err := io.WriteString(c, reqs.String()); err != nil {
				errs <- err
				return
			}
			got := make([]byte, want.Len())
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- err
				return
			}
			if string(got) != want.String() {
				at := 0
				for at < len(got) && got[at] == want.String()[at] {
					at++
				}
				errs <- fmt.Errorf("bytes differ from %d: %.40q, want %.40q", at, got[at:], want.String()[at:])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitIdle(t, s)
}
