package vllm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ErrEndpoint is returned by Subscriber.Run for an endpoint it can never
// dial (no scheme://); every other dial or receive error is retried.
var ErrEndpoint = errors.New("vllm: KV event endpoint must be scheme://address")

// Subscriber receives one publisher's KV event batches (vLLM's ZMQ PUB:
// multipart topic, 8-byte big-endian sequence, msgpack KVEventBatch) and
// hands them on in sequence order, across publisher restarts and broken
// connections (see stream.go for how the sequence is kept).
//
// Each connection is a fresh SUB socket, dialled with backoff until it
// connects: zmq4's own reconnection (WithAutomaticReconnect) cannot be
// trusted at v0.17.0. It re-dials synchronously on the reading goroutine
// (Conn.checkIO -> socket.scheduleRmConn -> socket.Dial), at most ten
// times 250ms, dropping the final error, and still hands the broken
// connection's io.EOF to Recv; a publisher down for longer than 2.5s is
// never dialled again. zmq4 sends no ZMTP PINGs (it only answers them), so
// a connection cut without a FIN or RST is noticed by TCP keep-alive
// (Go's net.Dialer default: 15s idle, then probes) or, sooner, by
// ProbeIdle's question to the replay socket.
type Subscriber struct {
	Endpoint       string // tcp://host:port of the PUB socket
	ReplayEndpoint string // tcp://host:port of the ROUTER socket; "" for none
	Topic          string
	ReplayTimeout  time.Duration // one replay request; default 2s
	DialTimeout    time.Duration // one TCP dial; default 5s
	// RetryMin and RetryMax bound the wait between dials of a publisher
	// that is not there: it doubles from RetryMin up to RetryMax
	// (defaults 100ms and 5s) and starts again at RetryMin after a
	// connection.
	RetryMin, RetryMax time.Duration
	// ProbeIdle is how long a connection may stay silent before the
	// replay socket is asked whether the publisher has published since
	// (then the connection is dead, cut without a FIN or RST, and is
	// dialled again) or restarted; default 10s, negative for never.
	ProbeIdle time.Duration
	Log       *slog.Logger
	// Batch receives every batch in order; Lost says batches are gone for
	// good (the receiver must forget what it derived from earlier ones).
	Batch func(seq uint64, b *Batch)
	Lost  func(reason string)
	// Received, Replayed, Gaps and Undecodable count batches and gaps;
	// Reconnects counts connections after the first, FailedDials the
	// dials that did not connect, Restarts the publisher restarts seen,
	// Losses the calls to Lost.
	Received, Replayed, Gaps, Undecodable     atomic.Uint64
	Reconnects, FailedDials, Restarts, Losses atomic.Uint64
	// Connected is whether a SUB connection is up now.
	Connected atomic.Bool

	st stream // Run's goroutine owns it
}

func (s *Subscriber) defaults() {
	if s.ReplayTimeout <= 0 {
		s.ReplayTimeout = 2 * time.Second
	}
	if s.DialTimeout <= 0 {
		s.DialTimeout = 5 * time.Second
	}
	if s.RetryMin <= 0 {
		s.RetryMin = 100 * time.Millisecond
	}
	if s.RetryMax < s.RetryMin {
		s.RetryMax = max(5*time.Second, s.RetryMin)
	}
	if s.ProbeIdle == 0 {
		s.ProbeIdle = 10 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

// Run subscribes until ctx ends: it returns nil then, and ErrEndpoint
// for an endpoint without a scheme; it never gives up on a publisher.
func (s *Subscriber) Run(ctx context.Context) error {
	s.defaults()
	if !strings.Contains(s.Endpoint, "://") {
		return fmt.Errorf("%w: %q", ErrEndpoint, s.Endpoint)
	}
	wait, connections, failures := s.RetryMin, 0, 0
	for ctx.Err() == nil {
		sub, err := s.dial(ctx)
		if err != nil {
			s.FailedDials.Add(1)
			failures++
			if failures == 1 {
				s.Log.Warn("KV events: publisher unreachable, re-dialling with backoff", "endpoint", s.Endpoint, "err", err)
			} else {
				s.Log.Debug("KV events: dial failed", "endpoint", s.Endpoint, "attempt", failures, "err", err)
			}
			if !sleep(ctx, wait) {
				break
			}
			wait = min(2*wait, s.RetryMax)
			continue
		}
		if connections++; connections > 1 {
			s.Reconnects.Add(1)
		}
		s.Log.Info("KV events: subscribed", "endpoint", s.Endpoint, "connection", connections, "failed_dials", failures)
		wait, failures = s.RetryMin, 0
		s.Connected.Store(true)
		err = s.receive(ctx, sub)
		s.Connected.Store(false)
		if ctx.Err() == nil {
			s.Log.Warn("KV events: connection lost, re-dialling", "endpoint", s.Endpoint, "err", err)
		}
	}
	return nil
}

// dial opens a fresh SUB socket on the endpoint, one TCP dial, no
// reconnection of zmq4's own.
func (s *Subscriber) dial(ctx context.Context) (zmq4.Socket, error) {
	sub := zmq4.NewSub(ctx, zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(s.DialTimeout))
	if err := sub.SetOption(zmq4.OptionSubscribe, s.Topic); err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("subscribing to %q: %w", s.Topic, err)
	}
	if err := sub.Dial(s.Endpoint); err != nil {
		_ = sub.Close()
		return nil, err
	}
	return sub, nil
}

// receive reads one connection's batches until it breaks, and closes it.
// Recv blocks and only a Close ends it, so it runs on its own goroutine
// while this one, which owns the stream, also probes an idle publisher.
func (s *Subscriber) receive(ctx context.Context, sub zmq4.Socket) error {
	msgs, errc, done := make(chan zmq4.Msg), make(chan error, 1), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			msg, err := sub.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- msg:
			case <-done:
				return
			}
		}
	}()
	defer func() {
		close(done)
		_ = sub.Close()
		wg.Wait()
	}()
	s.st.connected(ctx, s)
	var idle <-chan time.Time
	if s.ProbeIdle > 0 && s.ReplayEndpoint != "" {
		t := time.NewTicker(s.ProbeIdle)
		defer t.Stop()
		idle = t.C
	}
	heard := true
	for {
		select {
		case err := <-errc:
			return err
		case msg := <-msgs:
			heard = true
			if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
				s.Undecodable.Add(1)
				s.Log.Warn("KV events: unexpected message", "frames", len(msg.Frames))
				continue
			}
			s.st.live(ctx, s, binary.BigEndian.Uint64(msg.Frames[1]), msg.Frames[2])
		case <-idle:
			if !heard && !s.st.probe(ctx, s) {
				return errSilent
			}
			heard = false
		}
	}
}

// errSilent ends a connection that delivered nothing while the replay
// socket shows the publisher published.
var errSilent = errors.New("vllm: the publisher published batches this connection never delivered (cut without a FIN or RST?)")

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
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
