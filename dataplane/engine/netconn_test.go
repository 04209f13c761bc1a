package engine

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// chanSink is a Sink that hands each delivered event's tokens to a channel.
type chanSink chan []uint32

func (c chanSink) Deliver(ev *Event) bool {
	c <- append([]uint32(nil), ev.Tokens...)
	return true
}

// TestSinkGetsFrameBeforeReadWaits: over a real engine socket, a plain
// frame for a stream with a sink reaches the sink while the engine sends
// nothing more; the read loop hands its batch on before its read waits
// (engineConn.Read). Without that the frame waits for the engine's next one.
func TestSinkGetsFrameBeforeReadWaits(t *testing.T) {
	_, _, e, c := ttConnected(t)
	s, _ := ttOpen(t, e, c)
	c.send(t, s.id, ttTok(wire.TokFirst, 0, 1))
	select {
	case <-s.Ready():
	case <-time.After(ttWait):
		t.Fatal("no first event")
	}
	evs := s.Take()
	sink := make(chanSink, 4)
	s.Attach(sink)
	s.Release(evs)
	for i, id := range []uint32{2, 3} {
		c.send(t, s.id, ttTok(0, 0, id))
		select {
		case got := <-sink:
			if len(got) != 1 || got[0] != id {
				t.Fatalf("frame %d: the sink got %v, want [%d]", i, got, id)
			}
		case <-time.After(ttWait):
			t.Fatalf("frame %d: not delivered to the sink while the engine sent nothing more", i)
		}
	}
	s.Detach()
	c.send(t, s.id, ttTok(wire.TokLast, wire.FinishStop))
	if evs := ttCollect(t, s); len(evs) != 1 || !evs[0].Last {
		t.Fatalf("after Detach: %+v, want the last event", evs)
	}
}

// TestEngineConnAllocs: a read and a write through engineConn allocate
// nothing (its RawConn callbacks are bound once).
func TestEngineConnAllocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	c, err := dialEngine(ln.Addr().String(), ttWait, ttWait, &sinkBatch{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	out, in, echo := []byte("0123456789abcdef"), make([]byte, 64), make([]byte, 16)
	round := func() {
		if n, err := c.Write(out); n != len(out) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		if _, err := io.ReadFull(peer, echo); err != nil {
			t.Fatalf("peer read: %v", err)
		}
		if _, err := peer.Write(echo); err != nil {
			t.Fatalf("peer write: %v", err)
		}
		for got := 0; got < len(echo); {
			n, err := c.Read(in)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			got += n
		}
	}
	round()
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("%v allocations per write and read", n)
	}
}
