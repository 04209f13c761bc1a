package serve

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// holdChecks makes the media check of every GENERATE whose first image
// starts with "hold" signal entered and wait until release is called (or
// the test ends), so a test can look at the connection while one check
// runs.
func holdChecks(t *testing.T) (entered chan struct{}, release func()) {
	t.Helper()
	entered, gate := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	checkMedia = func(g *wire.Generate) error {
		if g.Media.Len() > 0 && bytes.HasPrefix(g.Media.At(0).Data, []byte("hold")) {
			entered <- struct{}{}
			<-gate
		}
		return wire.CheckMedia(g)
	}
	t.Cleanup(func() { release(); checkMedia = wire.CheckMedia })
	return entered, release
}

// waitFor waits for ch, failing the test after a generous while.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no " + what)
	}
}

// readUntil reads frames until want returns true for one.
func readUntil(t *testing.T, c *wire.Conn, what string, want func(wire.Frame) bool) {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if want(f) {
			return
		}
	}
}

func isPong(f wire.Frame) bool { return f.Type == wire.TypePong }

// heldImage is an image of two MEDIA chunks whose check holdChecks holds.
func heldImage() []byte {
	return append([]byte("hold"), bytes.Repeat([]byte("kvgate"), wire.MediaChunkSize/4)...)
}

// The content check of a large image does not hold up the router's other
// frames: while stream 1's check runs, a PING is answered and another
// stream's GENERATE reaches the backend; a GENERATE on stream 1 is a
// duplicate. Once the check ends, stream 1 reaches the backend with its
// bytes.
func TestMediaCheckOffReadLoop(t *testing.T) {
	f, c := startMedia(t, wire.FeatureMultimodal)
	entered, release := holdChecks(t) // after startMedia: released before the server closes
	img := heldImage()
	if err := c.SendGenerate(1, imageGen(img)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, entered, "check of stream 1")
	_ = c.Queue(0, &wire.Ping{Data: 7})
	_ = c.Queue(3, gen())
	_ = c.SendGenerate(1, imageGen([]byte("again")))
	readUntil(t, c, "PONG while stream 1 is checked", isPong)
	expectErrorNaming(t, c, 1, wire.CodeDuplicate, "stream is open")
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if _, ok := f.mediaOf(3); !ok {
			return fmt.Errorf("stream 3 did not reach the backend while stream 1 was checked")
		}
		return nil
	})
	if _, ok := f.mediaOf(1); ok {
		t.Fatal("stream 1 reached the backend before its check ended")
	}
	release()
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if m, ok := f.mediaOf(1); !ok || len(m) != 1 || !bytes.Equal(m[0], img) {
			return fmt.Errorf("stream 1 did not reach the backend with its image")
		}
		return nil
	})
}

// CANCEL while a stream's images are checked keeps its place in the
// stream: before the backend has the request, the stream ends CANCELLED
// and nothing runs; while Backend.Generate runs, the backend gets its
// Cancel after its Generate, never before.
func TestMediaCancelWhileChecked(t *testing.T) {
	f, c := startMedia(t, wire.FeatureMultimodal)
	entered, release := holdChecks(t) // after startMedia: released before the server closes
	_ = c.SendGenerate(1, imageGen(heldImage()))
	waitFor(t, entered, "check of stream 1")
	_ = c.Send(1, &wire.Cancel{})
	_ = c.Send(0, &wire.Ping{})
	readUntil(t, c, "PONG after the CANCEL", isPong) // the read loop has taken the CANCEL
	release()
	expectErrorNaming(t, c, 1, wire.CodeCancelled, "checked")
	if _, ok := f.mediaOf(1); ok {
		t.Fatal("a stream cancelled during its check reached the backend")
	}

	// The backend holds Generate of stream 3 while a CANCEL arrives.
	f.mu.Lock()
	f.hold, f.entered, f.holdStream = make(chan struct{}), make(chan struct{}), 3
	hold, inGenerate := f.hold, f.entered
	f.mu.Unlock()
	_ = c.SendGenerate(3, imageGen([]byte("small")))
	waitFor(t, inGenerate, "Generate of stream 3")
	_ = c.Send(3, &wire.Cancel{})
	_ = c.Send(0, &wire.Ping{})
	readUntil(t, c, "PONG after the CANCEL", isPong)
	close(hold)
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if ev := f.eventLog(); !slices.Equal(ev, []string{"generate 3", "cancel 3"}) {
			return fmt.Errorf("backend saw %q, want generate 3 then cancel 3", ev)
		}
		return nil
	})
}

// A router that goes away while a check runs: the server waits for the
// check and starts nothing for the gone connection, or cancels what it
// started (goleak, TestMain, checks nothing is left running).
func TestMediaDropWhileChecked(t *testing.T) {
	f, c := startMedia(t, wire.FeatureMultimodal)
	entered, release := holdChecks(t) // after startMedia: released before the server closes
	_ = c.SendGenerate(1, imageGen(heldImage()))
	waitFor(t, entered, "check of stream 1")
	c.Close()
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if n := f.srv.Routers(); n != 0 {
			return fmt.Errorf("%d routers still connected", n)
		}
		return nil
	})
	release()
	f.srv.Close() // returns once the connection's goroutines, the check's included, are done
	if ev := f.eventLog(); len(ev) != 0 && !slices.Equal(ev, []string{"generate 1", "cancel 1"}) {
		t.Fatalf("backend saw %q for a gone router: want nothing, or generate 1 then cancel 1", ev)
	}
}

// A connection's streams hold at most Limits.MaxPendingMediaBytes of
// declared images at once: the GENERATE that would pass it ends with
// OVERLOADED naming the limit, one that fits is served, and what a
// cancelled stream held is given back.
func TestMediaConnBound(t *testing.T) {
	const mib = 1 << 20
	f, c := startMedia(t, wire.FeatureMultimodal, func(cfg *Config) {
		cfg.Limits = wire.DefaultLimits()
		cfg.Limits.MaxPendingMediaBytes = 3 * mib
	})
	image := func(n int, seed byte) []byte { return bytes.Repeat([]byte{seed}, n) }
	_ = c.Send(1, imageGen(image(2*mib, 1))) // declared, its bytes never sent
	_ = c.Send(3, imageGen(image(2*mib, 3)))
	expectErrorNaming(t, c, 3, wire.CodeOverloaded, "max_pending_media_bytes is 3145728")
	if err := c.SendGenerate(5, imageGen(image(mib, 5))); err != nil { // 2 + 1 MiB: fits
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if _, ok := f.mediaOf(5); !ok {
			return fmt.Errorf("stream 5 did not reach the backend")
		}
		return nil
	})
	_ = c.Send(1, &wire.Cancel{})
	expectErrorNaming(t, c, 1, wire.CodeCancelled, "media")
	if err := c.SendGenerate(7, imageGen(image(3*mib, 7))); err != nil { // streams 1 and 5 gave theirs back
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if m, ok := f.mediaOf(7); !ok || len(m) != 1 || len(m[0]) != 3*mib {
			return fmt.Errorf("stream 7 did not reach the backend with its image")
		}
		return nil
	})
	if _, ok := f.mediaOf(3); ok {
		t.Fatal("the stream over the bound reached the backend")
	}
}
