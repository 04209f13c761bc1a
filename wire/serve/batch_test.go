package serve

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// batcher is a fake that is a Batcher: it logs Generate ("G<stream>"),
// Cancel ("C<stream>") and EndBatch ("E") in order.
type batcher struct {
	*fake
	logMu sync.Mutex
	log   []string
}

func (b *batcher) Generate(k Key, g *wire.Generate) error {
	b.note(fmt.Sprintf("G%d", k.Stream))
	return b.fake.Generate(k, g)
}

func (b *batcher) Cancel(k Key) {
	b.note(fmt.Sprintf("C%d", k.Stream))
	b.fake.Cancel(k)
}

func (b *batcher) EndBatch(uint64) { b.note("E") }

func (b *batcher) note(s string) {
	b.logMu.Lock()
	b.log = append(b.log, s)
	b.logMu.Unlock()
}

func (b *batcher) calls() []string {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return slices.Clone(b.log)
}

// TestBatcherEndBatch: a Batcher hears EndBatch after the GENERATEs a
// router sent together, once none is left to read, and after the cancels
// of a router that went away.
func TestBatcherEndBatch(t *testing.T) {
	b := &batcher{fake: &fake{}}
	s := New(Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}}}, b)
	b.srv = s
	c := servetest.Router(t, s)
	for _, st := range []uint32{1, 3, 5} {
		if err := c.Queue(st, gen()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil { // one write
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		log := b.calls()
		gens := slices.DeleteFunc(slices.Clone(log), func(s string) bool { return s == "E" })
		if !slices.Equal(gens, []string{"G1", "G3", "G5"}) || log[len(log)-1] != "E" {
			return fmt.Errorf("calls %v, want G1 G3 G5 (EndBatch between reads) and EndBatch last", log)
		}
		return nil
	})
	before := len(b.calls())
	c.Close() // the router goes: its streams are cancelled, then EndBatch
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		log := b.calls()[before:]
		if len(log) != 4 || log[3] != "E" {
			return fmt.Errorf("calls after the router left %v, want three cancels then EndBatch", log)
		}
		return nil
	})
}

// TestPublishOrder: Publish sends its events before its frames, and its
// TOKENS frames close their streams as Deliver's do.
func TestPublishOrder(t *testing.T) {
	f, s, c := start(t)
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.generated) != 1 {
			return fmt.Errorf("%d requests started", len(f.generated))
		}
		return nil
	})
	k := f.generated[0]
	tok := []Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokFirst | wire.TokLast, Finish: wire.FinishLength, Tokens: wire.TokensOf([]uint32{7})}}}
	s.Publish([]wire.Message{&wire.KVEvents{Seq: 1}}, tok)
	s.Publish(nil, tok) // the stream is closed: dropped
	s.Publish([]wire.Message{&wire.KVEvents{Seq: 2}}, nil)
	var got []string
	for len(got) < 3 {
		fr, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if fr.Type == wire.TypeKVEvents || fr.Type == wire.TypeTokens {
			got = append(got, fr.Type.String())
		}
	}
	if want := []string{wire.TypeKVEvents.String(), wire.TypeTokens.String(), wire.TypeKVEvents.String()}; !slices.Equal(got, want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
}

// TestDeliverAllocs: delivering a batch of frames allocates nothing.
func TestDeliverAllocs(t *testing.T) {
	f, s, c := start(t)
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.generated) != 1 {
			return fmt.Errorf("%d requests started", len(f.generated))
		}
		return nil
	})
	go func() { // the router reads what it is sent
		for {
			if _, err := c.ReadFrame(); err != nil {
				return
			}
		}
	}()
	batch := make([]Tokens, 8)
	for i := range batch {
		batch[i] = Tokens{Key: f.generated[0], Msg: wire.TokensMsg{Tokens: wire.TokensOf([]uint32{uint32(i)})}}
	}
	s.Deliver(batch)
	if n := testing.AllocsPerRun(100, func() { s.Deliver(batch) }); n != 0 {
		t.Fatalf("Deliver allocates %.1f times a batch", n)
	}
}
