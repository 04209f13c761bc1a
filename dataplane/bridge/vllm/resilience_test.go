package vllm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
)

// indexed is a subscriber feeding a translator, as the bridge has them:
// the translator's blocks are what every router's index holds for the rank.
type indexed struct {
	t   *testing.T
	h   *kvstore.Hasher
	tr  *vllm.Translator
	sub *vllm.Subscriber

	mu     sync.Mutex
	lost   []string
	served [][]uint32 // every prompt served, on every fake
	nudges int
}

// subscribe runs a subscriber on endpoint (and replay, "" for none) until
// the test ends.
func subscribe(t *testing.T, endpoint, replay string, opts ...func(*vllm.Subscriber)) *indexed {
	t.Helper()
	h := hasher(t)
	ix := &indexed{t: t, h: h, tr: vllm.NewTranslator(h, nil)}
	ix.sub = &vllm.Subscriber{Endpoint: endpoint, ReplayEndpoint: replay, Log: slog.New(slog.DiscardHandler),
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, ReplayTimeout: 10 * time.Second,
		Batch: func(_ uint64, b *vllm.Batch) { ix.tr.Apply(0, b.Events) },
		Lost: func(reason string) {
			ix.mu.Lock()
			ix.lost = append(ix.lost, reason)
			ix.mu.Unlock()
			ix.tr.Reset(0)
		}}
	for _, o := range opts {
		o(ix.sub)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ix.sub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ix
}

// tokens is a 12-token (three-block) prompt of its own for each seed.
func tokens(seed int) []uint32 {
	p := make([]uint32, 12)
	for i := range p {
		p[i] = uint32(seed*100 + i + 1)
	}
	return p
}

// serve runs prompts seed..seed+n-1 through f.
func (ix *indexed) serve(f *vllmtest.Fake, seed, n int) {
	for i := range n {
		p := tokens(seed + i)
		ix.mu.Lock()
		ix.served = append(ix.served, p)
		ix.mu.Unlock()
		f.Serve(p)
	}
}

// diff compares the translated blocks with the engine's, as kvgate hashes.
func (ix *indexed) diff(f *vllmtest.Fake) error {
	ix.mu.Lock()
	served := slices.Clone(ix.served)
	ix.mu.Unlock()
	want := map[uint64]bool{}
	for _, p := range served {
		kv, err := ix.h.Hash(nil, p, nil)
		if err != nil {
			return err
		}
		for i, eh := range f.BlockHashes(p) {
			if f.Cached(eh) {
				want[kv[i]] = true
			}
		}
	}
	got := map[uint64]bool{}
	for _, e := range ix.tr.Snapshot(0) {
		for _, k := range e.Hashes.AppendTo(nil) {
			got[k] = true
		}
	}
	missing, stale := 0, 0
	for k := range want {
		if !got[k] {
			missing++
		}
	}
	for k := range got {
		if !want[k] {
			stale++
		}
	}
	if missing+stale > 0 {
		return fmt.Errorf("translated %d blocks, the engine holds %d: %d missing, %d stale", len(got), len(want), missing, stale)
	}
	return nil
}

// waitEqual waits until the translated blocks are the engine's. With
// nudge, each failed look serves one more prompt: a batch published while
// a subscription was still landing is only seen missing when the next
// one comes.
func (ix *indexed) waitEqual(f *vllmtest.Fake, nudge bool) {
	ix.t.Helper()
	checkFor(ix.t, 30*time.Second, 20*time.Millisecond, func() error {
		err := ix.diff(f)
		if err != nil && nudge {
			ix.nudge(f)
		}
		return err
	})
}

// nudge serves a prompt never served before, so f publishes a batch.
func (ix *indexed) nudge(f *vllmtest.Fake) {
	ix.mu.Lock()
	ix.nudges++
	seed := 5000 + ix.nudges
	ix.mu.Unlock()
	ix.serve(f, seed, 1)
}

// settle brings a subscriber without a replay socket level with f: what
// f published before the subscription landed is gone for good, so once a
// batch has arrived the engine clears its cache (reset_prefix_cache) and
// serves afresh.
func (ix *indexed) settle(f *vllmtest.Fake, seed int) {
	ix.t.Helper()
	before := ix.sub.Received.Load()
	checkFor(ix.t, 30*time.Second, 20*time.Millisecond, func() error {
		if ix.sub.Received.Load() > before {
			return nil
		}
		ix.nudge(f)
		return fmt.Errorf("no batch from the engine at %s", f.EventsURL)
	})
	f.Clear()
	ix.serve(f, seed, 3)
	ix.waitEqual(f, false)
}

func (ix *indexed) lostReasons() string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return strings.Join(ix.lost, "; ")
}

func startProxy(t *testing.T, target string) *vllmtest.Proxy {
	t.Helper()
	p, err := vllmtest.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func startFake(t *testing.T, opts ...vllmtest.Option) *vllmtest.Fake {
	t.Helper()
	f, err := vllmtest.Start("m", 4, 1000, vllmtest.Tagged, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// restarted starts a fresh fake (empty cache, sequence from 0) on the
// ports of f, which it closes first: the engine process restarted.
func restarted(t *testing.T, f *vllmtest.Fake) *vllmtest.Fake {
	t.Helper()
	f.Close()
	return startFake(t, vllmtest.WithAddrs(f.Addrs()))
}

// TestSubscriberSurvivesPublisherRestart: the engine restarts (a fresh
// fake on the same ports, numbering batches from 0 again). The subscriber
// re-dials, sees the restart by sequence numbers and the replay socket,
// tells the receiver to forget the old engine's blocks exactly once, and
// the translated blocks equal the new engine's again: when the new engine
// has published less than the subscriber had seen, when it has published
// more (the numbers alone look like a gap), and with no replay socket.
func TestSubscriberSurvivesPublisherRestart(t *testing.T) {
	t.Run("replay, behind", func(t *testing.T) {
		f := startFake(t)
		ix := subscribe(t, f.EventsURL, f.ReplayURL)
		ix.serve(f, 1, 5)
		ix.waitEqual(f, true)
		f = restarted(t, f)
		ix.serve(f, 10, 2)
		ix.waitEqual(f, true)
		ix.check(1)
		f = restarted(t, f) // and again
		ix.serve(f, 20, 1)
		ix.waitEqual(f, true)
		ix.check(2)
	})
	t.Run("replay, ahead", func(t *testing.T) {
		f := startFake(t)
		p := startProxy(t, f.EventsURL)
		ix := subscribe(t, p.URL(), f.ReplayURL)
		ix.serve(f, 1, 5)
		ix.waitEqual(f, true)
		p.Cut(true)
		f = restarted(t, f)
		// Past the last batch the subscriber saw, with the subscriber away.
		ix.serve(f, 10, int(ix.sub.Received.Load())+3)
		p.Resume()
		ix.waitEqual(f, false)
		ix.check(1)
	})
	t.Run("no replay", func(t *testing.T) {
		f := startFake(t)
		ix := subscribe(t, f.EventsURL, "")
		ix.settle(f, 1)
		ix.serve(f, 20, 12) // the old engine's sequence well past the new one's first batches
		ix.waitEqual(f, false)
		f = restarted(t, f)
		checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if ix.sub.Restarts.Load() == 1 {
				return nil
			}
			ix.nudge(f)
			return fmt.Errorf("restart not seen: %d restarts, losses %q", ix.sub.Restarts.Load(), ix.lostReasons())
		})
		ix.settle(f, 60)
		ix.check(1)
	})
}

// check asserts restarts publisher restarts and as many losses, one
// reconnection at least.
func (ix *indexed) check(restarts uint64) {
	ix.t.Helper()
	s := ix.sub
	if s.Restarts.Load() != restarts || s.Losses.Load() != restarts || s.Reconnects.Load() < 1 {
		ix.t.Fatalf("restarts %d, losses %d (%s), reconnects %d; want %d, %d, >= 1",
			s.Restarts.Load(), s.Losses.Load(), ix.lostReasons(), s.Reconnects.Load(), restarts, restarts)
	}
}

// TestSubscriberSurvivesCut: the TCP connection is cut (a proxy closes
// both ends) and refused for a while; what was published meanwhile comes
// from the replay socket and nothing is forgotten. A cut with an
// immediate reconnection too.
func TestSubscriberSurvivesCut(t *testing.T) {
	f := startFake(t)
	p := startProxy(t, f.EventsURL)
	ix := subscribe(t, p.URL(), f.ReplayURL)
	ix.serve(f, 1, 5)
	ix.waitEqual(f, true)
	s := ix.sub
	p.Cut(true)
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if s.Connected.Load() {
			return fmt.Errorf("the subscriber has not seen the cut")
		}
		return nil
	})
	replayed := s.Replayed.Load()
	ix.serve(f, 10, 3)
	failed := s.FailedDials.Load()
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if s.FailedDials.Load() < failed+2 {
			return fmt.Errorf("the subscriber is not re-dialling: %d failed dials", s.FailedDials.Load())
		}
		return nil
	})
	p.Resume()
	ix.waitEqual(f, false)
	if got := s.Replayed.Load() - replayed; got < 3 {
		t.Fatalf("%d batches replayed after the cut, want the 3 published", got)
	}
	p.Cut(false)
	ix.serve(f, 20, 2)
	ix.waitEqual(f, true)
	if s.Losses.Load() != 0 || s.Restarts.Load() != 0 || s.Reconnects.Load() < 2 {
		t.Fatalf("losses %d (%s), restarts %d, reconnects %d after two cuts", s.Losses.Load(), ix.lostReasons(), s.Restarts.Load(), s.Reconnects.Load())
	}
}

// TestSubscriberProbesSilentConnection: a connection that dies without a
// FIN or RST (the proxy drops what passes, both ends open) delivers
// nothing; the idle probe finds on the replay socket what the publisher
// published, delivers it and dials again, with nothing forgotten.
func TestSubscriberProbesSilentConnection(t *testing.T) {
	f := startFake(t)
	p := startProxy(t, f.EventsURL)
	ix := subscribe(t, p.URL(), f.ReplayURL, func(s *vllm.Subscriber) { s.ProbeIdle = 50 * time.Millisecond })
	ix.serve(f, 1, 5)
	ix.waitEqual(f, true)
	p.Freeze()
	ix.serve(f, 10, 3)
	ix.waitEqual(f, false)
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if s := ix.sub; s.Reconnects.Load() < 1 || !s.Connected.Load() {
			return fmt.Errorf("reconnects %d, connected %v", s.Reconnects.Load(), s.Connected.Load())
		}
		return nil
	})
	ix.serve(f, 20, 2)
	ix.waitEqual(f, true)
	if s := ix.sub; s.Losses.Load() != 0 || s.Restarts.Load() != 0 {
		t.Fatalf("losses %d (%s), restarts %d", s.Losses.Load(), ix.lostReasons(), s.Restarts.Load())
	}
}

// TestSubscriberWaitsForPublisher: a publisher that is not up yet when the
// subscriber starts is dialled until it is, and its batches, those
// published before the subscription landed included (from the replay
// socket), are all translated.
func TestSubscriberWaitsForPublisher(t *testing.T) {
	var addrs [3]string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		_ = ln.Close()
	}
	ix := subscribe(t, "tcp://"+addrs[0], "tcp://"+addrs[1])
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := ix.sub.FailedDials.Load(); n < 2 {
			return fmt.Errorf("%d failed dials", n)
		}
		return nil
	})
	f := startFake(t, vllmtest.WithAddrs(addrs[0], addrs[1], addrs[2]))
	ix.serve(f, 1, 4)
	ix.waitEqual(f, true)
	if s := ix.sub; s.Losses.Load() != 0 || s.Reconnects.Load() != 0 {
		t.Fatalf("losses %d (%s), reconnects %d", s.Losses.Load(), ix.lostReasons(), s.Reconnects.Load())
	}
}

// TestSubscriberBadEndpoint: an endpoint that can never be dialled is the
// one error Run returns; it does not retry it.
func TestSubscriberBadEndpoint(t *testing.T) {
	s := &vllm.Subscriber{Endpoint: "127.0.0.1:5557", Batch: func(uint64, *vllm.Batch) {}, Lost: func(string) {}}
	if err := s.Run(context.Background()); !errors.Is(err, vllm.ErrEndpoint) {
		t.Fatalf("Run(%q) = %v, want ErrEndpoint", s.Endpoint, err)
	}
}
