package ebpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cebpf "github.com/cilium/ebpf"
)

// upstreamWritten counts the body bytes upstreams have written.
var upstreamWritten atomic.Int64

// serveEach listens on loopback, runs handle on each connection (closing
// it after), and returns the address; the listener and every connection
// still open close with the test, as httptest.Server's do. (An upstream
// whose proxy gave up on a sockmap-steered response can otherwise wait in
// Write for tcp_fin_timeout: the proxy's closed socket lingers in
// FIN-WAIT-2 with a zero window.)
func serveEach(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	open := map[net.Conn]bool{} // nil once the test has ended
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			c.Close()
		}
		open = nil
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if open == nil {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = true
			mu.Unlock()
			go func() {
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// bodyGate holds a "/wait" response's body back until the test sends.
var bodyGate = make(chan struct{})

// bodies caches body(id, size) for upstream.
var bodies sync.Map

// upstream answers "GET /<id>/<size>[/close|/reset|/wait]" with that many
// bytes, with Content-Length, or until it closes the connection (or resets
// it halfway); /wait sends the body only when bodyGate lets it.
func upstream(t testing.TB) string {
	t.Helper()
	return serveEach(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		parts := strings.Split(strings.Fields(string(buf[:n]))[1], "/")
		id, _ := strconv.Atoi(parts[1])
		size, _ := strconv.Atoi(parts[2])
		closeMode := len(parts) > 3 && parts[3] == "close"
		reset := len(parts) > 3 && parts[3] == "reset"
		wait := len(parts) > 3 && parts[3] == "wait"
		var hdr string
		if closeMode {
			hdr = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
		} else {
			hdr = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
		}
		key := [2]int{id, size}
		v, ok := bodies.Load(key)
		if !ok {
			v, _ = bodies.LoadOrStore(key, body(id, size))
		}
		b := v.([]byte)
		if reset {
			_, _ = c.Write(append([]byte(hdr), b[:size/2]...))
			// Not synchronisation: an engine that dies a moment after half
			// its body. Whether the proxy has read that half by the reset
			// or not, the client must not get a whole response.
			time.Sleep(20 * time.Millisecond)
			c.(*net.TCPConn).SetLinger(0)
			return
		}
		_, _ = c.Write([]byte(hdr))
		if wait {
			<-bodyGate
		}
		for off := 0; off < len(b); off += 100 << 10 { // several segments
			n, err := c.Write(b[off:min(off+100<<10, len(b))])
			upstreamWritten.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
}

// proxy relays each request of a keep-alive client to a fresh upstream
// connection, steering the response with s.
func proxy(t *testing.T, s Steerer, up string) (string, *proxyStats) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	st := &proxyStats{failed: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go st.serve(t, s, up, c.(*net.TCPConn))
		}
	}()
	return ln.Addr().String(), st
}

type proxyStats struct {
	mu     sync.Mutex
	errs   []error
	failed chan struct{} // closed with the first error
}

func (st *proxyStats) fail(err error) {
	st.mu.Lock()
	st.errs = append(st.errs, err)
	if len(st.errs) == 1 {
		close(st.failed)
	}
	st.mu.Unlock()
}

func (st *proxyStats) serve(t *testing.T, s Steerer, upAddr string, client *net.TCPConn) {
	defer client.Close()
	buf := make([]byte, 4096)
	for {
		n, err := client.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				st.fail(fmt.Errorf("reading the next request: %w", err))
			}
			return
		}
		req := append([]byte(nil), buf[:n]...)
		c, err := net.Dial("tcp", upAddr)
		if err != nil {
			st.fail(err)
			return
		}
		up := c.(*net.TCPConn)
		p, err := s.Prepare(up, client)
		if err != nil {
			st.fail(err)
			up.Close()
			return
		}
		ok := st.relay(p, up, client, req)
		_ = p.Release()
		up.Close()
		if !ok {
			return
		}
	}
}

// relay forwards one request and steers its response; false ends the
// client connection.
func (st *proxyStats) relay(p Pair, up, client *net.TCPConn, req []byte) bool {
	if _, err := up.Write(req); err != nil {
		st.fail(err)
		return false
	}
	var head []byte
	buf := make([]byte, 512)
	for !bytes.Contains(head, []byte("\r\n\r\n")) {
		n, err := p.Read(buf)
		if err != nil {
			st.fail(err)
			return false
		}
		head = append(head, buf[:n]...)
	}
	end := bytes.Index(head, []byte("\r\n\r\n")) + 4
	total := int64(-1)
	if i := bytes.Index(head, []byte("Content-Length: ")); i >= 0 && i < end {
		v := head[i+16:]
		n, _ := strconv.Atoi(string(v[:bytes.IndexByte(v, '\r')]))
		total = int64(end + n)
	}
	if _, err := client.Write(head); err != nil {
		st.fail(fmt.Errorf("writing the head: %w", err))
		return false
	}
	if total >= 0 && int64(len(head)) >= total {
		return true
	}
	if _, err := p.Steer(context.Background(), int64(len(head)), total); err != nil {
		st.fail(err)
		return false
	}
	return total >= 0 // a close-delimited response ends the client connection too
}

// get sends one request on c and reads its response.
func get(c net.Conn, path string) (status string, b []byte, err error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return "", nil, err
	}
	var head []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if _, err := c.Read(one); err != nil {
			return "", nil, err
		}
		head = append(head, one[0])
	}
	if i := bytes.Index(head, []byte("Content-Length: ")); i >= 0 {
		v := head[i+16:]
		n, _ := strconv.Atoi(string(v[:bytes.IndexByte(v, '\r')]))
		b = make([]byte, n)
		_, err = io.ReadFull(c, b)
	} else {
		b, err = io.ReadAll(c)
	}
	return string(head[:bytes.IndexByte(head, '\r')]), b, err
}

// steerer returns a steerer of mode, closed when t ends. A sockmap steerer
// skips t where it cannot load (requireSockmap).
func steerer(t *testing.T, mode Mode) Steerer {
	t.Helper()
	switch mode {
	case ModeSockmap:
		return newSockmap(t)
	case ModeSplice:
		return NewSplice()
	case ModeCopy:
		return NewCopy()
	}
	t.Fatalf("no steering mode %q", mode)
	return nil
}

// newSockmap loads the sockmap steerer, closed when t ends; t is skipped
// where it cannot load (requireSockmap).
func newSockmap(t *testing.T) *sockmap {
	t.Helper()
	requireSockmap(t)
	s, err := NewSockmap()
	if err != nil {
		t.Fatalf("loading the sockmap programs: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*sockmap)
}

// TestByteExact: responses of many sizes, several on one keep-alive client
// connection, arrive byte for byte through every mode; so do responses
// ended by the upstream closing.
func TestByteExact(t *testing.T) {
	eachMode(t, func(t *testing.T, s Steerer, addr string, st *proxyStats) {
		c := dial(t, addr, 60*time.Second)
		for i, size := range []int{0, 1, 100, 1460, 65535, 65536, 1 << 20, 3<<20 + 17, 0, 8 << 20} {
			_, b, err := get(c, fmt.Sprintf("/%d/%d", i, size))
			if d := bodyDiff(b, i, size); err != nil || d != "" {
				select { // the proxy may still be recording why
				case <-st.failed:
				case <-time.After(5 * time.Second):
				}
				st.mu.Lock()
				t.Fatalf("response %d: %s, %v, errors %v", i, d, err, st.errs)
			}
		}
		c2 := dial(t, addr, 60*time.Second)
		if _, b, err := get(c2, "/7/2000000/close"); err != nil || bodyDiff(b, 7, 2000000) != "" {
			t.Fatalf("close-delimited: %s, %v", bodyDiff(b, 7, 2000000), err)
		}
		assertEmpty(t, s)
	})
}

// steeredWait starts a "/wait" request of size body bytes through a proxy
// steering with sockmap, and returns once Steer has turned steering on,
// with the body still held back. finish lets the body go and returns what
// the client got.
func steeredWait(t *testing.T, id, size int) (sm *sockmap, st *proxyStats, finish func() ([]byte, error)) {
	t.Helper()
	sm = newSockmap(t)
	addr, st := proxy(t, sm, upstream(t))
	c := dial(t, addr, 60*time.Second)
	done := make(chan error, 1)
	var b []byte
	go func() {
		var err error
		_, b, err = get(c, fmt.Sprintf("/%d/%d/wait", id, size))
		done <- err
	}()
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if !steering(sm) { // Steer has written the control entry
			return errors.New("steering never turned on for the held response")
		}
		return nil
	})
	return sm, st, func() ([]byte, error) {
		bodyGate <- struct{}{}
		err := <-done
		return b, err
	}
}

// TestSockmapRedirects: a body that starts after steering is on and user
// space has written the head goes from socket to socket without passing
// through user space (the client reads at once, so it has credit).
func TestSockmapRedirects(t *testing.T) {
	const size = 4 << 20
	sm, _, finish := steeredWait(t, 11, size)
	before := sm.relayed.Load()
	if b, err := finish(); err != nil || bodyDiff(b, 11, size) != "" {
		t.Fatalf("%s, %v", bodyDiff(b, 11, size), err)
	}
	if r := sm.relayed.Load() - before; r != 0 {
		t.Fatalf("%d of %d body bytes went through user space", r, size)
	}
}

// TestSockmapCatchesDuplicates: when the program has counted more bytes
// than TCP received (what the kernel's double verdict looks like, forced
// here by adding a segment to the counter), Steer abandons the response
// with ErrDuplicated and the client gets a cut connection, not a body.
func TestSockmapCatchesDuplicates(t *testing.T) {
	const size = 1 << 20
	sm, st, finish := steeredWait(t, 12, size)
	it := sm.o.stat.Iterate()
	var k uint64
	var v [statSize]byte
	if !it.Next(&k, &v) {
		t.Fatalf("no counter entry: %v", it.Err())
	}
	binary.NativeEndian.PutUint64(v[statPassed:], binary.NativeEndian.Uint64(v[statPassed:])+65483)
	if err := sm.o.stat.Update(k, v[:], cebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	if b, err := finish(); err == nil {
		t.Fatalf("the client read a whole response (%s)", bodyDiff(b, 12, size))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.errs) != 1 || !errors.Is(st.errs[0], ErrDuplicated) {
		t.Fatalf("proxy errors %v, want ErrDuplicated", st.errs)
	}
}

// relayed is how many bytes a sockmap steerer relayed in user space so far.
func relayed(s Steerer) uint64 {
	if sm, ok := s.(*sockmap); ok {
		return sm.relayed.Load()
	}
	return 0
}

// steering reports whether some pair has steering on.
func steering(sm *sockmap) bool {
	it := sm.o.ctl.Iterate()
	var k uint64
	var v [ctlSize]byte
	for it.Next(&k, &v) {
		if binary.NativeEndian.Uint64(v[ctlEnabled:]) == 1 {
			return true
		}
	}
	return false
}

// TestConcurrentStreams: many clients at once, each several responses.
func TestConcurrentStreams(t *testing.T) {
	eachMode(t, func(t *testing.T, s Steerer, addr string, st *proxyStats) {
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for k := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(60 * time.Second))
				for i := range 5 {
					id, size := k*10+i, 1000+k*77777+i*31
					if _, b, err := get(c, fmt.Sprintf("/%d/%d", id, size)); err != nil || bodyDiff(b, id, size) != "" {
						errs <- fmt.Errorf("client %d response %d: %s, %v", k, i, bodyDiff(b, id, size), err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%v (proxy errors %v)", err, st.errs)
		}
		assertEmpty(t, s)
	})
}

// TestResets: an upstream reset mid-response ends that client connection
// with an error and leaves nothing behind in the maps; so does a client
// that resets while its response is steered.
func TestResets(t *testing.T) {
	eachMode(t, func(t *testing.T, s Steerer, addr string, _ *proxyStats) {
		c := dial(t, addr, 30*time.Second)
		if _, _, err := get(c, "/1/4000000/reset"); err == nil {
			t.Fatal("a response cut by an upstream reset read as whole")
		}
		c.Close()
		// A client that goes away mid-response.
		c = dial(t, addr, 30*time.Second)
		fmt.Fprintf(c, "GET /2/%d HTTP/1.1\r\n\r\n", 64<<20)
		_, _ = c.Read(make([]byte, 1000))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		assertEmpty(t, s)
	})
}

// eachMode runs f as a subtest per steering mode, with a proxy in front of
// up; the sockmap subtest is skipped where sockmap cannot load.
func eachMode(t *testing.T, f func(t *testing.T, s Steerer, addr string, st *proxyStats)) {
	up := upstream(t)
	for _, mode := range []Mode{ModeSockmap, ModeSplice, ModeCopy} {
		t.Run(string(mode), func(t *testing.T) {
			s := steerer(t, mode)
			addr, st := proxy(t, s, up)
			f(t, s, addr, st)
		})
	}
}

// dial connects a client to the proxy, closed when the test ends.
func dial(t *testing.T, addr string, within time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(within))
	return c
}

func mapsEmpty(s Steerer) bool {
	sm, ok := s.(*sockmap)
	if !ok {
		return true
	}
	for _, m := range []interface {
		NextKey(key, next any) error
	}{sm.o.ctl, sm.o.stat, sm.o.socks, sm.o.clients} {
		var k uint64
		if err := m.NextKey(nil, &k); err == nil {
			return false
		}
	}
	return true
}

// assertEmpty fails unless the maps empty within 20 s: a client can hold
// its whole response before the proxy has released the pair, all the more
// on a loaded machine.
func assertEmpty(t *testing.T, s Steerer) {
	t.Helper()
	checkFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if !mapsEmpty(s) {
			return errors.New("entries left in the maps after every stream ended")
		}
		return nil
	})
}

// TestSlowClient: a client that stops reading does not make the kernel
// hold the upstream's bytes without bound: the upstream stalls within a
// bound, and the response still arrives whole when the client reads again.
//
// Under sockmap, Linux 6.18 sometimes runs the verdict program twice on one
// segment while the client is paused (0-4% of looped runs here), so that
// segment would reach the client twice. The steerer must catch that
// (ErrDuplicated) and cut the connection before the client has a whole
// response; a duplicate that reaches the client fails the test.
func TestSlowClient(t *testing.T) {
	eachMode(t, func(t *testing.T, s Steerer, addr string, st *proxyStats) {
		c := dial(t, addr, 120*time.Second)
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		const size = 128 << 20
		before := upstreamWritten.Load()
		fmt.Fprintf(c, "GET /3/%d HTTP/1.1\r\n\r\n", size)
		var head []byte
		one := make([]byte, 1)
		for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
			if _, err := c.Read(one); err != nil {
				t.Fatal(err)
			}
			head = append(head, one[0])
		}
		got := make([]byte, size)
		if _, err := io.ReadFull(c, got[:1000]); err != nil {
			t.Fatal(err)
		}
		// Not synchronisation: the client's pause. The test bounds what the
		// upstream writes meanwhile; a longer pause only makes it stricter.
		time.Sleep(time.Second)
		stalled := upstreamWritten.Load() - before
		if stalled > 64<<20 {
			t.Fatalf("the upstream wrote %d MB while the client read nothing", stalled>>20)
		}
		if _, err := io.ReadFull(c, got[1000:]); err != nil {
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.errs) == 1 && errors.Is(st.errs[0], ErrDuplicated) {
				t.Logf("%s: the kernel duplicated response bytes; the steerer caught it and cut the response", s.Mode())
				return
			}
			t.Fatalf("reading the rest: %v (%v)", err, st.errs)
		}
		if d := bodyDiff(got, 3, size); d != "" {
			t.Fatalf("the response changed on the way: %s (%d bytes relayed in user space)", d, relayed(s))
		}
		t.Logf("%s: upstream wrote %d MB while the client paused", s.Mode(), stalled>>20)
	})
}
