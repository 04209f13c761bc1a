package vllm

import (
	"bytes"
	"context"
	"fmt"
)

// stream is where a Subscriber stands in its publisher's sequence.
//
// vLLM numbers a publisher's batches from 0 (ZmqEventPublisher._seq_gen =
// itertools.count() in vllm/distributed/kv_events.py at
// b4e69e0af33f4698e157a262cc787fe61983cd3d), and a publisher restarts only
// with its engine process, which breaks the TCP connection. So:
//   - on one connection, a batch at or below the last delivered is a
//     duplicate of a replayed one, and a number skipped is a batch missed;
//   - across a reconnect the numbers cannot tell a restarted publisher that
//     has already published past the last batch from the one before, but
//     the replay socket can: the same publisher still holds the last
//     delivered batch, byte for byte (its payload carries its timestamp);
//     a restarted one holds another batch under that number, or none.
//
// Each reconnect therefore asks for a replay from the last delivered
// batch, and a start (or a restart) for one from 0: what the buffer still
// holds of the engine's history. Without a replay socket a reconnect
// that goes on at last+1 is taken for the same publisher.
type stream struct {
	have    bool   // a batch was delivered since the start or a restart
	last    uint64 // its sequence number
	payload []byte // and its payload, to recognise its publisher
	settled bool   // this connection's position is known
}

type catchUpResult uint8

const (
	caughtUp   catchUpResult = iota // the same publisher; replayed what it had
	noAnswer                        // no replay socket, or it did not answer
	restarted                       // another publisher: the last batch is not its
	rolledOver                      // the last batch is out of the replay buffer
)

// connected runs when a connection is up: it replays what was missed
// while there was none and decides whether the publisher restarted.
func (st *stream) connected(ctx context.Context, s *Subscriber) {
	st.settled = false
	if !st.have {
		st.settled = st.fresh(ctx, s, endSeq)
		return
	}
	switch st.catchUp(ctx, s, endSeq) {
	case caughtUp:
		st.settled = true
	case restarted:
		st.restart(ctx, s, fmt.Sprintf("publisher restarted: its replay buffer does not hold batch %d as delivered", st.last), endSeq)
	case rolledOver:
		s.Gaps.Add(1)
		st.lose(s, fmt.Sprintf("batches after %d missed while disconnected and no longer replayable (the publisher restarted or published past its replay buffer)", st.last))
		st.have = false
		st.settled = st.fresh(ctx, s, endSeq)
	}
}

// live handles a batch from the PUB socket.
func (st *stream) live(ctx context.Context, s *Subscriber, seq uint64, payload []byte) {
	defer func() { st.settled = true }()
	switch {
	case !st.have:
		if seq > 0 {
			st.fresh(ctx, s, seq) // what preceded the subscription
		}
		if !st.have || seq == st.last+1 {
			st.deliver(s, seq, payload)
		}
	case seq <= st.last:
		if !st.settled {
			st.restart(ctx, s, fmt.Sprintf("publisher restarted: batch %d after %d", seq, st.last), seq)
			st.live(ctx, s, seq, payload)
		} // else a duplicate of a replayed batch
	case seq == st.last+1:
		st.deliver(s, seq, payload)
	default:
		s.Gaps.Add(1)
		switch st.catchUp(ctx, s, seq) {
		case caughtUp:
			if st.last+1 == seq {
				st.deliver(s, seq, payload)
				return
			}
		case restarted:
			st.restart(ctx, s, fmt.Sprintf("publisher restarted: batch %d after %d is another publisher's", seq, st.last), seq)
			st.live(ctx, s, seq, payload)
			return
		}
		st.lose(s, fmt.Sprintf("batches %d..%d missed and not replayed", st.last+1, seq-1))
		st.deliver(s, seq, payload)
	}
}

// probe asks the replay socket, on a silent connection, what the
// publisher has published since the last batch; it reports whether the
// connection may stay: false when batches came that it never delivered.
// A restart found is handled as at a reconnect.
func (st *stream) probe(ctx context.Context, s *Subscriber) bool {
	if !st.have {
		return true
	}
	last := st.last
	switch st.catchUp(ctx, s, endSeq) {
	case caughtUp:
		return st.last == last
	case restarted:
		st.restart(ctx, s, fmt.Sprintf("publisher restarted: its replay buffer does not hold batch %d as delivered", last), endSeq)
		return false
	}
	return true
}

// restart forgets the old publisher and replays the new one's history
// before until.
func (st *stream) restart(ctx context.Context, s *Subscriber, reason string, until uint64) {
	s.Restarts.Add(1)
	st.lose(s, reason)
	st.have = false
	st.settled = st.fresh(ctx, s, until)
}

// fresh replays the batches before until from the start of the replay
// buffer; it reports whether the replay socket answered.
func (st *stream) fresh(ctx context.Context, s *Subscriber, until uint64) bool {
	return s.fetchReplay(ctx, 0, func(seq uint64, payload []byte) bool {
		if seq >= until || (st.have && seq != st.last+1) {
			return false
		}
		s.Replayed.Add(1)
		st.deliver(s, seq, payload)
		return true
	})
}

// catchUp replays the batches after the last delivered and before until,
// once the replay socket has shown it still holds the last one.
func (st *stream) catchUp(ctx context.Context, s *Subscriber, until uint64) catchUpResult {
	first, res := true, caughtUp
	answered := s.fetchReplay(ctx, st.last, func(seq uint64, payload []byte) bool {
		if first {
			first = false
			switch {
			case seq == st.last && bytes.Equal(payload, st.payload):
				return true
			case seq == st.last:
				res = restarted
			default:
				res = rolledOver
			}
			return false
		}
		if seq >= until || seq != st.last+1 {
			return false
		}
		s.Replayed.Add(1)
		st.deliver(s, seq, payload)
		return true
	})
	switch {
	case !answered:
		return noAnswer
	case first: // nothing at or after last: a publisher not that far since it restarted
		return restarted
	}
	return res
}

// deliver decodes a batch and hands it on.
func (st *stream) deliver(s *Subscriber, seq uint64, payload []byte) {
	st.have, st.last, st.payload = true, seq, payload
	b, err := DecodeBatch(payload)
	if err != nil {
		s.Undecodable.Add(1)
		// A batch we cannot read is a batch lost: its stores would leave
		// later removals and children untranslatable.
		s.Log.Warn("KV events: undecodable batch", "seq", seq, "err", err)
		st.lose(s, fmt.Sprintf("batch %d undecodable", seq))
		return
	}
	s.Received.Add(1)
	s.Batch(seq, b)
}

func (st *stream) lose(s *Subscriber, reason string) {
	s.Losses.Add(1)
	s.Lost(reason)
}
