package bridgeutil

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestGenerationPostRetriedOnClosedReuse: a server that hangs up on a
// kept-alive connection instead of answering its next request (an idle
// close racing the reuse) costs a generation nothing: a bridge's
// client asks again on a fresh connection. Without the Idempotency-Key
// the same POST fails with EOF.
func TestGenerationPostRetriedOnClosedReuse(t *testing.T) {
	var mu sync.Mutex
	served := map[string]int{} // requests answered per client connection
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n := served[r.RemoteAddr]
		served[r.RemoteAddr] = n + 1
		mu.Unlock()
		if n == 1 { // the connection's second request: hang up unanswered
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.(*net.TCPConn).SetLinger(0)
				_ = c.Close()
			}
			return
		}
		_, _ = io.WriteString(w, "data: {}\n\n")
	}))
	defer srv.Close()

	for _, keyed := range []bool{true, false} {
		c := NewHTTPClient()
		do := func() error {
			req, err := GenerationPost(context.Background(), srv.URL+"/completion", []byte(`{"prompt":[1]}`))
			if err != nil {
				t.Fatal(err)
			}
			if !keyed {
				req.Header.Del("Idempotency-Key")
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}
		if err := do(); err != nil {
			t.Fatal(err)
		}
		err := do() // on the kept-alive connection, which the server drops
		if keyed && err != nil {
			t.Fatalf("with the key, the second request failed: %v", err)
		}
		if !keyed && err == nil {
			t.Fatal("without the key the second request succeeded: the test does not reach the retry")
		}
		c.CloseIdleConnections()
	}
}
