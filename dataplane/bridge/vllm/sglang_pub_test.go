package vllm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// sglangPublisher is SGLang's ZmqEventPublisher reduced to its wire
// (python/sglang/srt/disaggregation/kv_events.py at sgl-project/sglang
// 612d579090db24ec7c47cc5ca6b83e0c649b8c28): PUB frames | topic | seq (8B
// BE) | payload |, and a ROUTER that answers | identity | (empty) | start |
// with | identity | (empty) | seq | payload | per buffered batch from start
// on and | identity | (empty) | -1 | (empty) | at the end. It is not a fake
// SGLang server: it publishes given payloads, nothing else.
type sglangPublisher struct {
	pub, router zmq4.Socket
	topic       []byte
	mu          sync.Mutex
	buf         [][]byte // payload of seq i
}

func startSGLangPublisher(t *testing.T, topic string) *sglangPublisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &sglangPublisher{pub: zmq4.NewPub(ctx), router: zmq4.NewRouter(ctx, zmq4.WithID(zmq4.SocketIdentity("replay"))), topic: []byte(topic)}
	if err := p.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := p.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); p.serveReplay() }()
	t.Cleanup(func() { cancel(); p.pub.Close(); p.router.Close(); <-done })
	return p
}

func (p *sglangPublisher) urls() (events, replay string) {
	return "tcp://" + p.pub.Addr().String(), "tcp://" + p.router.Addr().String()
}

// publish sends payload as the next batch and keeps it for replay.
func (p *sglangPublisher) publish(payload []byte) {
	p.mu.Lock()
	seq := uint64(len(p.buf))
	p.buf = append(p.buf, payload)
	p.mu.Unlock()
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	_ = p.pub.Send(zmq4.NewMsgFrom(p.topic, sb[:], payload))
}

func (p *sglangPublisher) serveReplay() {
	for {
		msg, err := p.router.Recv()
		if err != nil {
			return
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue // SGLang logs "Invalid replay request" and drops it
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		p.mu.Lock()
		buf := append([][]byte(nil), p.buf...)
		p.mu.Unlock()
		for seq := start; seq < uint64(len(buf)); seq++ {
			var sb [8]byte
			binary.BigEndian.PutUint64(sb[:], seq)
			_ = p.router.Send(zmq4.NewMsgFrom(id, []byte{}, sb[:], buf[seq]))
		}
		end := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		_ = p.router.Send(zmq4.NewMsgFrom(id, []byte{}, end, []byte{}))
	}
}

// TestSGLangPublisherWire: a Subscriber reads SGLang's frames under a
// topic, and what the PUB socket dropped before the subscription landed
// (and all it published before the subscriber started) comes back
// through SGLang's replay reply, so every batch arrives once,
// in order, decoded, and nothing is reported lost.
func TestSGLangPublisherWire(t *testing.T) {
	files := []string{"sglang_v0_pages.hex", "sglang_rank.hex", "sglang_medium.hex", "sglang_salt.hex", "sglang_tagged.hex"}
	want := make([]*vllm.Batch, len(files))
	payloads := make([][]byte, len(files))
	for i, f := range files {
		payloads[i] = readHex(t, f)
		b, err := vllm.DecodeBatch(payloads[i])
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
	}
	p := startSGLangPublisher(t, "kv-events")
	events, replay := p.urls()
	var mu sync.Mutex
	var got []*vllm.Batch
	var seqs []uint64
	var lost []string
	s := &vllm.Subscriber{Endpoint: events, ReplayEndpoint: replay, Topic: "kv-events", Log: slog.New(slog.DiscardHandler),
		Batch: func(seq uint64, b *vllm.Batch) { mu.Lock(); seqs, got = append(seqs, seq), append(got, b); mu.Unlock() },
		Lost:  func(r string) { mu.Lock(); lost = append(lost, r); mu.Unlock() }}
	// Three batches before the subscriber starts: only the replay socket
	// can deliver them.
	for i := range 3 {
		p.publish(payloads[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = s.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	// PUB drops what it sends before the subscription lands: publish the
	// vectors in turn until the subscriber has seen ten batches.
	i := 3
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		p.publish(payloads[i%len(payloads)])
		i++
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 10 {
			return fmt.Errorf("%d batches received", len(got))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 0 || s.Replayed.Load() < 3 {
		t.Fatalf("lost: %v; %d batches replayed", lost, s.Replayed.Load())
	}
	for j, seq := range seqs {
		if seq != uint64(j) {
			t.Fatalf("sequence %v", seqs)
		}
		if !reflect.DeepEqual(got[j], want[j%len(want)]) {
			t.Fatalf("batch %d: %+v, want %+v", j, got[j], want[j%len(want)])
		}
	}
}
