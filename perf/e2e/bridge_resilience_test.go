//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestBridgeSurvivesPublisherRestartAndCut: kvgate -> kvgate-bridge -> a
// fake vLLM whose PUB socket sits behind a TCP proxy. The proxy cuts the
// connection and refuses it for a while: the bridge re-dials and replays
// what was published meanwhile, so kvgate's index equals the engine's
// blocks again (hash for hash) with nothing forgotten. Then the engine restarts (a fresh
// fake on the same ports, sequence from 0, empty cache): the bridge sees
// the restart, tells kvgate to forget the old blocks, and the index
// equals the new engine's blocks. The bridge process never restarts.
func TestBridgeSurvivesPublisherRestartAndCut(t *testing.T) {
	f, err := vllmtest.Start(model, 16, 48, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	p, err := vllmtest.StartProxy(f.EventsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	br := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
		"--kv-events", p.URL(), "--replay", f.ReplayURL, "--model", model, "--block-size", "16", "--id", "vllm-0",
		"--metrics-interval", "100ms")
	line := br.waitLog(t, "bridge serving")
	addr, bridgeAdmin := line["addr"].(string), "http://"+line["admin"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	admin := adminOf(t, base)

	n := 0
	text := func() string {
		n++
		return fmt.Sprintf("Conversation %d. %s", n, strings.Repeat("The bridge outlives its engine's restarts. ", 10))
	}
	// Until the index matches, one more completion each look: a batch
	// published while a subscription is landing shows missing only when
	// the next one comes.
	settle := func(f *vllmtest.Fake) {
		t.Helper()
		checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			err := sameSet(indexSets(t, admin)[addr], engineSet(t, f, nil))
			if err == nil && f.Blocks() > 0 {
				return nil
			}
			complete(t, base, text(), 1)
			return fmt.Errorf("%v (the engine holds %d blocks)", err, f.Blocks())
		})
	}
	settle(f)

	// Cut, and published to while cut off: replayed, nothing lost.
	p.Cut(true)
	complete(t, base, text(), 1)
	complete(t, base, text(), 1)
	p.Resume()
	waitIndex(t, admin, addr, f)
	waitMetric(t, bridgeAdmin, "kvgate_bridge_subscriber_reconnects_total ", " 1")
	waitMetric(t, bridgeAdmin, "kvgate_bridge_event_losses_total ", " 0")

	// The engine restarts on the same ports. settle compares hash sets, and
	// the new engine holds none of the old one's blocks (its prompts are
	// new): the index equal to it has forgotten them.
	f.Close()
	ev, rp, hp := f.Addrs()
	f, err = vllmtest.Start(model, 16, 48, vllmtest.Tagged, vllmtest.WithAddrs(ev, rp, hp))
	if err != nil {
		t.Fatal(err)
	}
	complete(t, base, text(), 1)
	settle(f)
	waitMetric(t, bridgeAdmin, "kvgate_bridge_publisher_restarts_total ", " 1")
	waitMetric(t, bridgeAdmin, "kvgate_bridge_event_losses_total ", " 1")
	waitMetric(t, bridgeAdmin, "kvgate_bridge_subscribers_connected ", " 1")
}
