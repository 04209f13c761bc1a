package gateway

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// syncBuffer is a log sink the test reads while the gateway writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitInflightZero waits until the server serves no request: every path
// the last request took finished or aborted it exactly once.
func waitInflightZero(t *testing.T, srv *httpx.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for srv.Active() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight", srv.Active())
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
}
