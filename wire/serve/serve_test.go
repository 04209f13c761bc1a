package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// fake is a Backend that records calls and answers as told.
type fake struct {
	mu        sync.Mutex
	srv       *Server
	generated []Key
	cancelled []Key
	snapshots []uint32
	busy      bool
	refuse    error
}

func (f *fake) Generate(k Key, g *wire.Generate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.generated = append(f.generated, k)
	f.busy = true
	return nil
}

func (f *fake) Cancel(k Key) {
	f.mu.Lock()
	f.cancelled = append(f.cancelled, k)
	f.mu.Unlock()
	f.srv.Deliver([]Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishCancelled}}})
}

func (f *fake) Load() []wire.Load {
	return []wire.Load{{DPRank: 0, Running: 3}, {DPRank: 1, Waiting: 2}}
}

func (f *fake) Snapshot(conn uint64, id uint32) {
	f.mu.Lock()
	f.snapshots = append(f.snapshots, id)
	f.mu.Unlock()
	_ = f.srv.SendTo(conn, &wire.Snapshot{SnapshotID: id, Last: true})
}

func (f *fake) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.busy
}

func start(t *testing.T) (*fake, *Server, *wire.Conn) {
	t.Helper()
	f := &fake{}
	s := New(Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}}, DrainTimeout: 5 * time.Second}, f)
	f.srv = s
	return f, s, servetest.Router(t, s)
}

func gen() *wire.Generate {
	return &wire.Generate{Model: []byte("m"), MaxTokens: 4, TopP: 1, Prompt: wire.TokensOf([]uint32{1, 2, 3})}
}

func expectError(t *testing.T, c *wire.Conn, stream uint32, code wire.ErrorCode) {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == wire.TypeError && f.Stream == stream {
			var e wire.Error
			if err := wire.DecodeFrame(f, &e, nil); err != nil || e.Code != code {
				t.Fatalf("stream %d: ERROR %v (%v), want %v", stream, e.Code, err, code)
			}
			return
		}
	}
}

// TestStreams: the stream table (duplicates refused, a refusal's code kept,
// CANCEL only for open streams, frames for closed streams dropped), LOAD
// and SNAPSHOT requests, and the cancellation of a gone router's streams.
func TestStreams(t *testing.T) {
	f, s, c := start(t)
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	expectError(t, c, 1, wire.CodeDuplicate)

	f.mu.Lock()
	f.refuse = &StreamError{Code: wire.CodeUnknownLoRA, Message: "no such adapter"}
	f.mu.Unlock()
	_ = c.Send(3, gen())
	expectError(t, c, 3, wire.CodeUnknownLoRA)
	f.mu.Lock()
	f.refuse = errors.New("plain error")
	f.mu.Unlock()
	_ = c.Send(5, gen())
	expectError(t, c, 5, wire.CodeBadRequest)
	f.mu.Lock()
	f.refuse = nil
	f.mu.Unlock()

	_ = c.Send(9, &wire.Cancel{}) // unknown stream: ignored
	_ = c.Send(1, &wire.Cancel{})
	_ = c.Send(0, &wire.LoadRequest{})
	_ = c.Send(0, &wire.SnapshotRequest{SnapshotID: 77})
	var last, loads, snaps int
	for last == 0 || loads < 2 || snaps == 0 {
		fr, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch fr.Type {
		case wire.TypeTokens:
			var m wire.TokensMsg
			if wire.DecodeFrame(fr, &m, nil) == nil && m.Last() && fr.Stream == 1 && m.Finish == wire.FinishCancelled {
				last++
			}
		case wire.TypeLoad:
			loads++
		case wire.TypeSnapshot:
			snaps++
		}
	}
	f.mu.Lock()
	if len(f.cancelled) != 1 || f.snapshots[0] != 77 {
		t.Fatalf("cancelled %v, snapshots %v", f.cancelled, f.snapshots)
	}
	f.mu.Unlock()
	// Stream 1 is closed: a late frame for it is dropped, not sent.
	s.Deliver([]Tokens{{Key: Key{Conn: 1, Stream: 1}, Msg: wire.TokensMsg{Tokens: wire.TokensOf([]uint32{5})}}})

	// A router that goes away has its open streams cancelled.
	_ = c.Send(11, gen())
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.generated) < 2 {
			return fmt.Errorf("the backend has %d streams, want 2 (stream 11 open)", len(f.generated))
		}
		return nil
	})
	c.Close()
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.cancelled) != 2 {
			return fmt.Errorf("the gone router's stream was not cancelled: %d cancelled, want 2", len(f.cancelled))
		}
		return nil
	})
}

// TestProtocolErrors: GENERATE on stream 0 and a router-only frame close
// the connection with ERROR PROTOCOL.
func TestProtocolErrors(t *testing.T) {
	for _, m := range []wire.Message{gen(), &wire.KVEvents{}} {
		_, _, c := start(t)
		_ = c.Send(0, m)
		expectError(t, c, 0, wire.CodeProtocol)
		if _, err := c.ReadFrame(); err == nil {
			t.Fatalf("%s: the connection stayed open", m.Type())
		}
	}
}

// TestDrain: Shutdown sends GOAWAY, refuses new requests with OVERLOADED
// and waits for the backend to go idle.
func TestDrain(t *testing.T) {
	f, s, c := start(t)
	_ = c.Send(1, gen())
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if f.Idle() {
			return errors.New("the backend did not start the request")
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	for {
		fr, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if fr.Type == wire.TypeGoaway {
			break
		}
	}
	_ = c.Send(3, gen())
	expectError(t, c, 3, wire.CodeOverloaded)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a request ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.mu.Lock()
	f.busy = false
	f.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
