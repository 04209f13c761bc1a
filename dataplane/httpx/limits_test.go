package httpx

import (
	"bufio"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReaderIsLinear: a request fed one byte at a time costs memory
// linear in its size (it was quadratic: the whole buffer was copied and
// re-parsed on every read), and parses as it does in one piece.
func TestReaderIsLinear(t *testing.T) {
	const size = 1 << 20
	body := strings.Repeat("x", size)
	var chunked strings.Builder
	for i := 0; i < size; i += 4096 {
		chunked.WriteString("1000\r\n" + body[i:i+4096] + "\r\n")
	}
	chunked.WriteString("0\r\nX-Trailer: y\r\n\r\n")
	cases := map[string]string{
		"content-length": post("/x", body),
		"chunked":        "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked.String(),
		"long header":    "GET /x HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("h", 60<<10) + "\r\n\r\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			var req *Request
			alloc := allocated(func() {
				p := reader{lim: limits{maxHeader: 64 << 10, maxBody: 2 * size}}
				for i := 0; i < len(in); i++ {
					n, r, err := p.feed([]byte(in[i : i+1]))
					if err != nil || n != 1 {
						t.Fatalf("byte %d: took %d, %v", i, n, err)
					}
					if r != nil {
						req = r
					}
				}
			})
			if req == nil || req.Path != "/x" {
				t.Fatalf("no request parsed: %+v", req)
			}
			if name != "long header" && string(req.Body) != body {
				t.Fatalf("body of %d bytes, want %d", len(req.Body), size)
			}
			if limit := uint64(4*len(in)) + 1<<20; alloc > limit {
				t.Fatalf("fed byte by byte, %d bytes allocated for a %d-byte request (want at most %d)", alloc, len(in), limit)
			}
		})
	}
}

// TestHeaderTimeoutFromRequestStart: the header timeout counts from the
// request's first byte, not from the end of the previous response: a
// keep-alive request sent after an idle pause, itself split by a short
// pause, is served.
func TestHeaderTimeoutFromRequestStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HeaderTimeout, cfg.IdleTimeout = 3*time.Second, time.Hour
	s := serveT(t, cfg, echo)
	c := dialT(t, s)
	br := bufio.NewReader(c)
	for i, pause := range []time.Duration{0, 2500 * time.Millisecond} {
		time.Sleep(pause) // idle between requests: counts against the idle timeout only
		_, _ = io.WriteString(c, "GET /a HTTP/1.1\r\n")
		time.Sleep(time.Second) // inside the header: well within HeaderTimeout
		_, _ = io.WriteString(c, "Host: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}

// TestSlowUploadHasBodyTimeout: a body that takes longer than the header
// timeout to arrive is read to the end under its own, longer timeout.
func TestSlowUploadHasBodyTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HeaderTimeout, cfg.BodyTimeout = time.Second, time.Hour
	s := serveT(t, cfg, echo)
	c := dialT(t, s)
	_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
	for _, b := range "hello" {
		time.Sleep(600 * time.Millisecond) // 3 s in all, three header timeouts
		_, _ = io.WriteString(c, string(b))
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "/up:hello" {
		t.Fatalf("body %q", b)
	}
}

// TestBodyTimeout: a body that stops arriving is answered 408.
func TestBodyTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HeaderTimeout, cfg.BodyTimeout = time.Hour, time.Second
	s := serveT(t, cfg, echo)
	resp, _ := roundTrip(t, s, "POST", "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe")
	if resp.StatusCode != 408 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestRefusals: what the parser refuses reaches the client as a status in
// the OpenAI error shape, and the connection closes.
func TestRefusals(t *testing.T) {
	s := serveT(t, DefaultConfig(), echo)
	for raw, status := range map[string]int{
		"GET / HTTP/1.1\r\n\r\n":                                                                                          400,
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab":                                                      400,
		"GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a\nSet-Cookie: x\r\n\r\n":                                             400,
		"GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("a", 70<<10):                                                  431,
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + strings.Repeat("T: abcdefgh\r\n", 6000): 431,
	} {
		resp, body := roundTrip(t, s, "GET", raw)
		if resp.StatusCode != status || !strings.Contains(body, `"error"`) || !resp.Close {
			t.Errorf("%.40q: %d %s (close %v)", raw, resp.StatusCode, body, resp.Close)
		}
	}
}

// TestHead: a HEAD answer has the GET answer's head and no content, so
// the next response on the connection is read as one.
func TestHead(t *testing.T) {
	s := serveT(t, DefaultConfig(), echo)
	c := dialT(t, s)
	_, _ = io.WriteString(c, "HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n"+get("/g"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len("/h:")) {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("after HEAD: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "/g:" {
		t.Fatalf("after HEAD the next response reads %q", b)
	}
}

// TestEveryRequestEndsOnce: a handler that panics is answered 500 and
// logged, one that returns without finishing is aborted, one that
// finishes twice counts once: each time the in-flight count is back to
// zero and the server keeps serving.
func TestEveryRequestEndsOnce(t *testing.T) {
	s := serveT(t, DefaultConfig(), handlerFunc(func(w *ResponseWriter, r *Request) {
		switch r.Path {
		case "/panic":
			panic("boom")
		case "/forget":
			return
		case "/twice":
			_ = w.Finish()
			_ = w.Finish()
			w.Abort()
		case "/panic-after-finish":
			_ = w.Finish()
			panic("late")
		}
	}))
	for _, path := range []string{"/panic", "/twice", "/panic-after-finish"} {
		resp, body := roundTrip(t, s, "GET", get(path))
		want := map[string]int{"/panic": 500}[path]
		if want == 0 {
			want = 200
		}
		if resp.StatusCode != want {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if path == "/panic" && !strings.Contains(body, `"server_error"`) {
			t.Fatalf("panic answered %s", body)
		}
		waitIdle(t, s)
	}
	c := dialT(t, s)
	_, _ = io.WriteString(c, get("/forget"))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("forgotten response: %d bytes, %v", n, err)
	}
	waitIdle(t, s)
	if resp, _ := roundTrip(t, s, "GET", get("/twice")); resp.StatusCode != 200 {
		t.Fatal("server stopped serving")
	}
}

// TestHeaderInjectionDropped: a response field whose value holds CR or LF
// is dropped, never written as two lines.
func TestHeaderInjectionDropped(t *testing.T) {
	s := serveT(t, DefaultConfig(), handlerFunc(func(w *ResponseWriter, r *Request) {
		w.Header().Set("X-Request-Id", "a\r\nSet-Cookie: x=1")
		w.Header().Set("X-Ok", "fine")
		_ = w.Finish()
	}))
	resp, _ := roundTrip(t, s, "GET", get("/"))
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Request-Id") != "" || resp.Header.Get("X-Ok") != "fine" {
		t.Fatalf("header %v", resp.Header)
	}
}

// TestWholeResponseLargerThanPendingWrite: a whole response eight times
// MaxPendingWrite reaches a client that reads it, byte for byte.
func TestWholeResponseLargerThanPendingWrite(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPendingWrite = 256 << 10
	big := strings.Repeat("0123456789abcdef", (8*cfg.MaxPendingWrite)/16)
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		_, _ = w.Write([]byte(big))
		_ = w.Finish()
	}))
	resp, body := roundTrip(t, s, "GET", get("/big"))
	if resp.StatusCode != 200 || body != big {
		t.Fatalf("status %d, %d of %d bytes", resp.StatusCode, len(body), len(big))
	}
	waitIdle(t, s)
}

// TestStalledReaderOfWholeResponseIsCut: a client that reads nothing of a
// large whole response is cut off after WriteStallTimeout, and the
// request ends.
func TestStalledReaderOfWholeResponseIsCut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPendingWrite, cfg.WriteStallTimeout, cfg.SocketSendBuffer = 64<<10, time.Second, 16<<10
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		_, _ = w.Write(make([]byte, 64<<20))
		_ = w.Finish()
	}))
	c := dialT(t, s)
	_, _ = io.WriteString(c, get("/big"))
	waitIdle(t, s) // without the cut the handler would wait for ever
}

// TestPipelinedInputIsNotRead: while a request is served, what the
// client sends ahead is not read past the pipeline window: the client's
// writes block (TCP backpressure) after what the kernels' socket buffers
// hold, not after the whole 48 MB; once the request ends, the pipelined
// one is read and served.
func TestPipelinedInputIsNotRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 64 << 20
	release, entered := make(chan struct{}), make(chan struct{})
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		if r.Path == "/block" {
			close(entered)
			<-release
		}
		_, _ = w.Write([]byte(strconv.Itoa(len(r.Body))))
		_ = w.Finish()
	}))
	c := dialT(t, s)
	const size = 48 << 20
	_, _ = io.WriteString(c, get("/block")+"POST /next HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n")
	<-entered
	var written atomic.Int64
	wrote := make(chan error, 1)
	go func() {
		piece := make([]byte, 256<<10)
		for written.Load() < size {
			n, err := c.Write(piece)
			written.Add(int64(n))
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	// Wait until the writer stops making progress for a second.
	last, since := int64(-1), time.Now()
	for time.Since(since) < time.Second && written.Load() < size {
		if n := written.Load(); n != last {
			last, since = n, time.Now()
		}
		time.Sleep(10 * time.Millisecond) // the poll interval
	}
	if n := written.Load(); n > 24<<20 {
		t.Fatalf("the server read %d MB pipelined behind a request in service", n>>20)
	}
	t.Logf("the client could write %d KB ahead", written.Load()>>10)
	close(release)
	br := bufio.NewReader(c)
	for i, want := range []string{"0", strconv.Itoa(size)} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != want {
			t.Fatalf("response %d: %q, want %q", i, b, want)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
