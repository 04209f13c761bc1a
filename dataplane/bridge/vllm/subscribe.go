package vllm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// endSeq is the replay socket's end-of-replay sequence number (-1).
const endSeq = ^uint64(0)

// Subscriber receives one publisher's KV event batches (vLLM's ZMQ PUB:
// multipart topic, 8-byte big-endian sequence, msgpack KVEventBatch) and
// hands them on in sequence order. A gap in the sequence asks vLLM's
// replay socket (ROUTER: send the first missing sequence number, receive
// (seq, payload) pairs until seq -1) for what was missed; what cannot be
// replayed is reported as lost, and so is a publisher restart (the
// sequence going back).
type Subscriber struct {
	Endpoint       string // tcp://host:port of the PUB socket
	ReplayEndpoint string // tcp://host:port of the ROUTER socket; "" for none
	Topic          string
	ReplayTimeout  time.Duration
	Log            *slog.Logger
	// Batch receives every batch in order; Lost says batches are gone for
	// good (the receiver must forget what it derived from earlier ones).
	Batch func(seq uint64, b *Batch)
	Lost  func(reason string)
	// Received, Replayed, Gaps and Undecodable count batches and gaps.
	Received, Replayed, Gaps, Undecodable atomic.Uint64
}

// Run subscribes until ctx ends.
func (s *Subscriber) Run(ctx context.Context) error {
	if s.ReplayTimeout <= 0 {
		s.ReplayTimeout = 2 * time.Second
	}
	sub := zmq4.NewSub(ctx, zmq4.WithAutomaticReconnect(true), zmq4.WithDialerRetry(250*time.Millisecond))
	defer sub.Close()
	if err := sub.Dial(s.Endpoint); err != nil {
		return fmt.Errorf("vllm: subscribing to %s: %w", s.Endpoint, err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, s.Topic); err != nil {
		return err
	}
	var last uint64
	started := false
	for {
		msg, err := sub.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("vllm: receiving KV events: %w", err)
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			s.Undecodable.Add(1)
			s.Log.Warn("KV events: unexpected message", "frames", len(msg.Frames))
			continue
		}
		seq := binary.BigEndian.Uint64(msg.Frames[1])
		switch {
		case started && seq <= last:
			s.Lost(fmt.Sprintf("publisher restarted (sequence %d after %d)", seq, last))
		case started && seq > last+1:
			s.Gaps.Add(1)
			last = s.replay(ctx, last, seq)
			if last+1 < seq {
				s.Lost(fmt.Sprintf("batches %d..%d missed and not replayed", last+1, seq-1))
			}
		}
		started, last = true, seq
		s.deliver(seq, msg.Frames[2])
	}
}

func (s *Subscriber) deliver(seq uint64, payload []byte) {
	b, err := DecodeBatch(payload)
	if err != nil {
		s.Undecodable.Add(1)
		// A batch we cannot read is a batch lost: its stores would leave
		// later removals and children untranslatable.
		s.Log.Warn("KV events: undecodable batch", "seq", seq, "err", err)
		s.Lost("undecodable batch")
		return
	}
	s.Received.Add(1)
	s.Batch(seq, b)
}

// replay fetches batches after last and before next; it returns the last
// sequence number it delivered.
func (s *Subscriber) replay(ctx context.Context, last, next uint64) uint64 {
	if s.ReplayEndpoint == "" {
		return last
	}
	rctx, cancel := context.WithTimeout(ctx, s.ReplayTimeout)
	defer cancel()
	d := zmq4.NewDealer(rctx, zmq4.WithDialerTimeout(s.ReplayTimeout))
	defer d.Close()
	if err := d.Dial(s.ReplayEndpoint); err != nil {
		s.Log.Warn("KV events: replay socket", "endpoint", s.ReplayEndpoint, "err", err)
		return last
	}
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], last+1)
	// A DEALER sends the empty delimiter a REQ socket would add.
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, start[:])); err != nil {
		s.Log.Warn("KV events: replay request", "err", err)
		return last
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			s.Log.Warn("KV events: replay cut short", "err", err, "delivered_up_to", last)
			return last
		}
		frames := msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:] // the delimiter
		}
		if len(frames) != 2 || len(frames[0]) != 8 {
			s.Log.Warn("KV events: unexpected replay message", "frames", len(frames))
			return last
		}
		seq := binary.BigEndian.Uint64(frames[0])
		if seq == endSeq || len(frames[1]) == 0 {
			return last
		}
		if seq != last+1 || seq >= next {
			if seq > last+1 {
				return last // the replay buffer no longer holds what we need
			}
			continue // already have it, or the live stream has it
		}
		s.Replayed.Add(1)
		s.deliver(seq, frames[1])
		last = seq
	}
}

// RankEndpoint is vLLM's endpoint for a data-parallel rank: the port is
// offset by the rank (rank 0 keeps it).
func RankEndpoint(endpoint string, rank int) (string, error) {
	if endpoint == "" || rank == 0 {
		return endpoint, nil
	}
	i := strings.LastIndex(endpoint, ":")
	if !strings.HasPrefix(endpoint, "tcp://") || i < len("tcp://") {
		return "", errors.New("vllm: data-parallel ranks need tcp:// endpoints with a port")
	}
	var port int
	if _, err := fmt.Sscanf(endpoint[i+1:], "%d", &port); err != nil {
		return "", fmt.Errorf("vllm: endpoint %q: %w", endpoint, err)
	}
	return fmt.Sprintf("%s:%d", endpoint[:i], port+rank), nil
}
