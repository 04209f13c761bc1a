package vllm

import (
	"context"
	"encoding/binary"

	"github.com/go-zeromq/zmq4"
)

// endSeq is the replay socket's end-of-replay sequence number (-1).
const endSeq = ^uint64(0)

// fetchReplay asks vLLM's replay socket for the batches from start on and
// calls each with them in sequence order until each returns false or the
// end marker comes. It reports whether the socket answered to the end (or
// until each stopped it): false for no replay endpoint, a dial that
// failed, a timeout or a malformed reply.
//
// The protocol (ZmqEventPublisher._service_replay, vllm
// vllm/distributed/kv_events.py at b4e69e0af33f4698e157a262cc787fe61983cd3d
// and 0181ea3173e53eea8cf04a86891488e3dc89bb34; SGLang's copy in
// python/sglang/srt/disaggregation/kv_events.py at
// 612d579090db24ec7c47cc5ca6b83e0c649b8c28), DEALER side, each frame of a
// multipart message between bars:
//
//	request: |  (empty)  | start seq (8B BE) |
//	reply:   |  (empty)  | seq (8B BE) | payload |   for each buffered seq >= start
//	end:     |  (empty)  | 0xFF x 8 (-1) | (empty) |
//
// A later kv_events.py (read in the index without a repository or commit
// to pin) puts the topic in every reply as the PUB socket does, and an
// empty one in the end marker (replyFrames reads both):
//
//	reply:   |  (empty)  | topic | seq (8B BE) | payload |
//	end:     |  (empty)  | (empty) | 0xFF x 8 (-1) | (empty) |
//
// The buffer is a deque of the last buffer_steps (default 10,000)
// published batches, appended right after each send on the same thread
// that serves replays, so every batch a subscriber saw is there until
// 10,000 newer ones push it out.
func (s *Subscriber) fetchReplay(ctx context.Context, start uint64, each func(seq uint64, payload []byte) bool) bool {
	if s.ReplayEndpoint == "" {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, s.ReplayTimeout)
	defer cancel()
	d := zmq4.NewDealer(rctx, zmq4.WithDialerTimeout(s.ReplayTimeout), zmq4.WithDialerMaxRetries(0))
	defer d.Close()
	if err := d.Dial(s.ReplayEndpoint); err != nil {
		s.Log.Warn("KV events: replay socket", "endpoint", s.ReplayEndpoint, "err", err)
		return false
	}
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], start)
	// A DEALER sends the empty delimiter a REQ socket would add.
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, req[:])); err != nil {
		s.Log.Warn("KV events: replay request", "err", err)
		return false
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			s.Log.Warn("KV events: replay cut short", "err", err, "start", start)
			return false
		}
		seq, payload, ok := replyFrames(msg.Frames)
		if !ok {
			s.Log.Warn("KV events: unexpected replay message", "frames", len(msg.Frames))
			return false
		}
		if seq == endSeq || !each(seq, payload) {
			return true
		}
	}
}

// replyFrames reads one replay reply as a DEALER receives it, with or
// without the empty delimiter and the topic: its sequence number and
// payload, ok false for any other shape.
func replyFrames(frames [][]byte) (seq uint64, payload []byte, ok bool) {
	if len(frames) > 0 && len(frames[0]) == 0 && len(frames) > 2 {
		frames = frames[1:] // the delimiter
	}
	switch {
	case len(frames) == 2 && len(frames[0]) == 8: // | seq | payload |
	case len(frames) == 3 && len(frames[1]) == 8: // | topic | seq | payload |
		frames = frames[1:]
	default:
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(frames[0]), frames[1], true
}
