package syncring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

func TestMessagesRoundTrip(t *testing.T) {
	hb := heartbeat{Incarnation: 1, Engines: 2, EpochNum: 3, RoundsDone: 4, RoundsAbandoned: 5, RoundMicros: 6,
		RoundBytes: 7, ViewTokens: 8, Hears: []string{"a", "bb"}, EngineKeys: []string{"10.0.0.1:7000", "engine-b"}}
	var m message
	if err := decodeMessage(appendHeartbeat(nil, 99, &hb), &m, nil); err != nil || m.Epoch != 99 || !reflect.DeepEqual(m.Heartbeat, hb) {
		t.Fatalf("heartbeat: %v %+v", err, m.Heartbeat)
	}
	res := reserveBatch{Tag: 7, Items: []reservation{{Engine: 3, Load: Load{PrefillTokens: 4096, Requests: 1}}, {Engine: 0, Load: Load{PrefillTokens: -5, DecodeTokens: 77, Requests: -1}}}}
	if err := decodeMessage(appendReserve(nil, 1, &res), &m, nil); err != nil || !reflect.DeepEqual(m.Reserve, res) {
		t.Fatalf("reserve: %v %+v", err, m.Reserve)
	}
	if err := decodeMessage(appendDigest(nil, 1, []byte("digest")), &m, nil); err != nil || string(m.Digest) != "digest" {
		t.Fatalf("digest: %v %q", err, m.Digest)
	}
}

// TestChunkDeltas: a chunk crosses as deltas against the previous one on
// the same connection, and both ends reconstruct the same values.
func TestChunkDeltas(t *testing.T) {
	var send, recv deltaState
	rounds := [][]int64{{100, 2000, 3, 1 << 40}, {101, 2000, 3, 1 << 40}, {0, -7, 3, 5}}
	var sizes []int
	for _, v := range rounds {
		k := deltaKey{phase: phaseAllGather, index: 2}
		body := appendChunk(nil, 5, &chunk{Round: 1, Phase: phaseAllGather, Index: 2, Values: v}, send.base(k, len(v)))
		send.remember(k, v)
		sizes = append(sizes, len(body))
		var m message
		err := decodeMessage(body, &m, func(c *chunk, n int) []int64 { return recv.base(deltaKey{c.Phase, c.Index}, n) })
		if err != nil || !reflect.DeepEqual(m.Chunk.Values, v) {
			t.Fatalf("chunk %v: got %v, %v", v, m.Chunk.Values, err)
		}
		recv.remember(k, m.Chunk.Values)
	}
	if sizes[1] >= sizes[0] {
		t.Fatalf("an almost unchanged chunk took %d bytes, the first %d", sizes[1], sizes[0])
	}
}

func TestMalformedMessages(t *testing.T) {
	good := appendChunk(nil, 1, &chunk{Round: 1, Values: []int64{1, 2, 3}}, nil)
	var m message
	for n := range len(good) {
		if err := decodeMessage(good[:n], &m, noBase); err == nil {
			t.Fatalf("cut at %d decoded", n)
		}
	}
	if err := decodeMessage(append(good, 0), &m, noBase); !errors.Is(err, errMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	huge := appendHeader(nil, kindChunk, 1)
	huge = append(huge, make([]byte, 13)...)
	huge = append(huge, 0xff, 0xff, 0xff, 0x7f) // 2^31 values in a few bytes
	if err := decodeMessage(huge, &m, noBase); !errors.Is(err, errMalformed) {
		t.Fatalf("huge count: %v", err)
	}
	if err := decodeMessage([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0}, &m, noBase); err == nil {
		t.Fatal("unknown kind decoded")
	}
	unsorted := appendHeartbeat(nil, 1, &heartbeat{EngineKeys: []string{"b", "a"}})
	if err := decodeMessage(unsorted, &m, noBase); !errors.Is(err, errMalformed) {
		t.Fatalf("a heartbeat with unsorted engine keys: %v", err)
	}
	if err := decodeMessage(append([]byte{1}, unsorted[1:]...), &m, noBase); err == nil {
		t.Fatal("a format-1 HEARTBEAT (kind 1) decoded")
	}
}

func noBase(*chunk, int) []int64 { return nil }

// FuzzRingMessage: any body decodes or fails cleanly; what decodes encodes
// back to a body that decodes to the same message.
func FuzzRingMessage(f *testing.F) {
	f.Add(appendHeartbeat(nil, 1, &heartbeat{Incarnation: 1, Hears: []string{"x"}}))
	f.Add(appendChunk(nil, 1, &chunk{Round: 2, Phase: 1, Step: 1, Index: 1, Values: []int64{-1, 0, 1 << 50}}, nil))
	f.Add(appendReserve(nil, 1, &reserveBatch{Tag: 3, Items: []reservation{{Engine: 1, Load: Load{PrefillTokens: 9, Requests: 1}}}}))
	f.Add(appendDigest(nil, 1, []byte{1, 2, 3}))
	f.Fuzz(func(t *testing.T, body []byte) {
		var m message
		if err := decodeMessage(body, &m, noBase); err != nil {
			return
		}
		var again []byte
		switch m.Kind {
		case kindHeartbeat:
			again = appendHeartbeat(nil, m.Epoch, &m.Heartbeat)
		case kindChunk:
			again = appendChunk(nil, m.Epoch, &m.Chunk, nil)
		case kindReserve:
			again = appendReserve(nil, m.Epoch, &m.Reserve)
		case kindDigest:
			again = appendDigest(nil, m.Epoch, m.Digest)
		}
		var m2 message
		if err := decodeMessage(again, &m2, noBase); err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", m.Kind, err)
		}
		if m.Kind == kindHeartbeat && len(m.Heartbeat.Hears) == 0 {
			m.Heartbeat.Hears, m2.Heartbeat.Hears = nil, nil
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed %s:\n%+v\n%+v", m.Kind, m, m2)
		}
	})
}

// TestDNSPeers: a name standing for several replicas (a headless Service:
// one port, an address per replica) is re-resolved; a replica added to the
// name joins the ring, one removed from it leaves.
func TestDNSPeers(t *testing.T) {
	lns, port := sharedPortListeners(t, 3)
	var names atomic.Pointer[[]string]
	setNames := func(ips ...string) { names.Store(&ips) }
	setNames("127.0.0.2", "127.0.0.3")
	resolve := func(_ context.Context, host string) ([]string, error) {
		if host != "kvgate-ring.test" {
			return nil, errors.New("no such host")
		}
		return *names.Load(), nil
	}
	rs := make([]*replica, 3)
	for i := range rs {
		rs[i] = &replica{id: fmt.Sprintf("r%d", i), src: &source{loads: loadsFor(i)}}
		rs[i].start(t, []string{"kvgate-ring.test:" + port}, lns[i], func(c *Config) {
			c.Resolve, c.ResolveEvery = resolve, 20*time.Millisecond
		})
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.ring.Close()
		}
	})
	converged(t, rs[:2], "the two replicas in DNS")
	if n := len(rs[2].ring.Stats().Members); n != 1 {
		t.Fatalf("r2, not in DNS yet, is in a ring of %d", n)
	}
	setNames("127.0.0.2", "127.0.0.3", "127.0.0.4")
	converged(t, rs, "r2 joined through DNS")
	setNames("127.0.0.2", "127.0.0.4")
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if n0, n2 := len(rs[0].ring.Stats().Members), len(rs[2].ring.Stats().Members); n0 != 2 || n2 != 2 {
			return fmt.Errorf("r1 has not left through DNS: r0 counts %d members, r2 %d", n0, n2)
		}
		return nil
	})
	want := sumOf([]*replica{rs[0], rs[2]})
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if !rs[0].agrees(want) || !rs[2].agrees(want) {
			return errors.New("r0 and r2 do not agree on their sum")
		}
		return nil
	})
}

// sharedPortListeners listens on 127.0.0.2, .3, ... with one port, as
// replicas behind one DNS name do.
func sharedPortListeners(t *testing.T, n int) ([]net.Listener, string) {
	for range 20 {
		probe, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(probe.Addr().String())
		probe.Close()
		var lns []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%s", i+2, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			return lns, port
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Skip("no port free on 127.0.0.2-4 (loopback aliases unavailable?)")
	return nil, ""
}
