package vllm_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// collector records what a Subscriber delivers.
type collector struct {
	mu   sync.Mutex
	seqs []uint64
	lost []string
	evs  int
}

func (c *collector) batch(seq uint64, b *vllm.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seqs = append(c.seqs, seq)
	c.evs += len(b.Events)
}

func (c *collector) snapshot() ([]uint64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs...), append([]string(nil), c.lost...)
}

// TestSubscriberGapReplay: batches a subscriber missed are fetched from the
// replay socket in order, whether its replies carry the topic (a later
// kv_events.py) or not; when the replay buffer does not have them, the
// loss is reported.
func TestSubscriberGapReplay(t *testing.T) {
	for _, c := range []struct {
		enc   vllmtest.Encoding
		topic string
		opts  []vllmtest.Option
	}{
		{vllmtest.Positional, "", nil},
		{vllmtest.Tagged, "", nil},
		{vllmtest.Tagged, "kv@m", []vllmtest.Option{vllmtest.WithReplayTopic("kv@m")}},
		{vllmtest.Tagged, "", []vllmtest.Option{vllmtest.WithReplayTopic("")}},
	} {
		gapReplay(t, c.enc, c.topic, c.opts)
	}
}

func gapReplay(t *testing.T, enc vllmtest.Encoding, topic string, opts []vllmtest.Option) {
	f, err := vllmtest.Start("m", 4, 1000, enc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &collector{}
	s := &vllm.Subscriber{Endpoint: f.EventsURL, ReplayEndpoint: f.ReplayURL, Topic: topic, Log: slog.New(slog.DiscardHandler),
		Batch: c.batch, Lost: func(r string) { c.mu.Lock(); c.lost = append(c.lost, r); c.mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = s.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	// PUB drops what is sent before the subscription lands: publish
	// until the first batch arrives.
	i := 0
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		f.Serve(prompt(8 + 4*i))
		i++
		if seqs, _ := c.snapshot(); len(seqs) == 0 {
			return fmt.Errorf("encoding %d: no batch arrived after %d published", enc, i)
		}
		return nil
	})
	seqs, _ := c.snapshot()
	first := seqs[0]
	replayed := s.Replayed.Load() // the batches before the subscription landed may have been
	f.DropNext(2, false)
	for i := range 4 {
		f.Serve(prompt(400 + 4*i))
	}
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if s, _ := c.snapshot(); len(s) < len(seqs)+4 {
			return fmt.Errorf("encoding %d: gap not replayed: %d of %d batches", enc, len(s), len(seqs)+4)
		}
		return nil
	})
	seqs, lost := c.snapshot()
	for i, s := range seqs {
		if s != first+uint64(i) {
			t.Fatalf("encoding %d: sequence %v after a replayed gap", enc, seqs)
		}
	}
	if len(lost) != 0 || s.Replayed.Load()-replayed != 2 {
		t.Fatalf("encoding %d: lost %v, replayed %d", enc, lost, s.Replayed.Load()-replayed)
	}
	f.DropNext(1, true)
	f.Serve(prompt(900))
	f.Serve(prompt(904))
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if _, l := c.snapshot(); len(l) != 1 {
			return fmt.Errorf("encoding %d: %d losses reported, want 1", enc, len(l))
		}
		return nil
	})
}
