package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
)

// TestPoolPollsUntilClose: the pool serves the models an engine lists once
// it answers /v1/models, marks it down when it stops answering, and Close
// stops the poller (TestMain's leak check).
func TestPoolPollsUntilClose(t *testing.T) {
	var down atomic.Bool
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	}))
	defer engine.Close()
	p, err := NewPool([]string{engine.URL}, ebpf.NewCopy(), route.DefaultWeights(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.Start(5 * time.Millisecond)
	closed := false
	defer func() {
		if !closed {
			_ = p.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.Serves("m") || p.Serves("other") {
		t.Fatalf("serves m: %v, other: %v; the engine lists m only", p.Serves("m"), p.Serves("other"))
	}

	down.Store(true)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if p.Engines[0].Healthy() {
			return errors.New("the engine stopped answering and is still healthy")
		}
		return nil
	})
	if p.Serves("m") {
		t.Fatal("a down engine serves m")
	}
	closed = true
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
