package sim

import (
	"slices"
	"sync"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Token generation is deterministic: the k-th token of a request depends
// only on its seed and k, so a replayed trace produces the same text.

// vocabSize is the range of ordinary token ids the simulator emits (Qwen's
// byte-level BPE vocabulary without its special tokens).
const vocabSize = 151643

// DefaultEOS is the end-of-sequence id (Qwen's <|im_end|>).
const DefaultEOS = 151645

// eosOneIn makes a request without ignore_eos stop with probability 1/eosOneIn
// per token, about 256 tokens on average.
const eosOneIn = 256

func seedOf[ID string | []byte](requestID ID, prompt []uint32) uint64 {
	// Stable across runs: a fixed mix of the prompt ids and request id.
	h := uint64(0x9E3779B97F4A7C15)
	for _, t := range prompt {
		h = splitmix(h ^ uint64(t))
	}
	for i := 0; i < len(requestID); i++ {
		h = splitmix(h ^ uint64(requestID[i]))
	}
	return h
}

func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// nextToken returns the k-th generated token and whether it is EOS.
func nextToken(seed uint64, k int, ignoreEOS bool, eos uint32) (uint32, bool) {
	r := splitmix(seed + uint64(k)*0xD1B54A32D192ED03)
	if !ignoreEOS && r%eosOneIn == 0 {
		return eos, true
	}
	return uint32((r >> 8) % vocabSize), false
}

// maxStepsAhead bounds how many steps with output a server's ranks may
// finish while its writer is still sending earlier ones: a real engine's
// GPU does not wait for the output of the step before to reach the
// router, but its output queue is not endless either. With a zero-cost or
// sped-up profile steps are made faster than they can be written, and
// this many are ready at once.
const maxStepsAhead = 32

// outbox carries the steps' outputs from the ranks to the server's
// writer, which sends what has piled up whenever it is free: each token as
// soon as the connection can carry it, several steps' tokens of a stream
// in one frame for routers that take them (wire.FeatureTokenBatch), one
// frame a step for the others.
//
// Locks: mu guards every field; the writer holds it only to take the
// pending outputs, never while it writes.
type outbox struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when outputs arrive, are taken or the box closes
	pending []Output
	spare   []Output // the last batch's array, reused
	ends    []int    // where each pending step's outputs end in pending
	endsOut []int    // the ends of the batch being written
	busy    bool     // the writer is sending a batch
	closed  bool
}

func newOutbox() *outbox {
	o := &outbox{}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// add queues one step's outputs; wait makes a rank wait while
// maxStepsAhead steps are pending (a CANCEL's last output never waits).
func (o *outbox) add(outs []Output, wait bool) {
	if len(outs) == 0 {
		return
	}
	o.mu.Lock()
	for wait && len(o.ends) >= maxStepsAhead && !o.closed {
		o.cond.Wait()
	}
	o.pending = append(o.pending, outs...)
	o.ends = append(o.ends, len(o.pending))
	o.cond.Broadcast()
	o.mu.Unlock()
}

// take waits for pending outputs and returns them and where each step's
// end; false once closed.
func (o *outbox) take() ([]Output, []int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for (len(o.pending) == 0 || o.busy) && !o.closed { // busy: a driver writes a burst (writeHere)
		o.cond.Wait()
	}
	if o.closed {
		return nil, nil, false
	}
	outs, ends := o.pending, o.ends
	o.pending, o.spare = o.spare[:0], nil
	o.ends, o.endsOut = o.endsOut[:0], ends
	o.busy = true
	o.cond.Broadcast()
	return outs, ends, true
}

// sent returns a taken batch's array once it is written.
func (o *outbox) sent(outs []Output) {
	clear(outs)
	o.mu.Lock()
	o.busy, o.spare = false, outs[:0]
	o.mu.Unlock()
}

// writeHere gives the caller the writer's turn, for a batch it writes
// itself (a free rank's burst, inline.go), when nothing is pending or
// being written: then nothing older can be overtaken. done ends the turn.
func (o *outbox) writeHere() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy || len(o.pending) > 0 || o.closed {
		return false
	}
	o.busy = true
	return true
}

// done ends a writeHere turn; the writer takes what came meanwhile.
func (o *outbox) done() {
	o.mu.Lock()
	o.busy = false
	o.cond.Broadcast()
	o.mu.Unlock()
}

// idle reports whether nothing waits to be written or is being written.
func (o *outbox) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending) == 0 && !o.busy
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// frameBuilder turns outputs into TOKENS frames, its arrays reused from
// one batch to the next, so that building them allocates nothing once
// they have grown.
type frameBuilder struct {
	out   []serve.Tokens
	ids   []uint32
	lps   []wire.LogprobEntry
	open  map[serve.Key]int // the frame each batching stream's outputs join
	conns map[uint64]bool   // batches(conn) of the connections seen
	// ended, when not nil, limits the joining to these streams (a burst's,
	// burstFrames); the others get a frame per output.
	ended map[serve.Key]bool
	// Per frame: its first and last output, and whether its tokens carry
	// logprobs; per output, the next output of its frame (-1: none).
	first, last []int
	hasLP       []bool
	next        []int
}

// frames builds the frames of outs for the routers whose batches(conn) is
// want, in order. A stream of a router that batches has one frame for all
// its outputs; other streams one frame per output, as before the feature.
// With fb.ended set (burstFrames) want is not looked at: every router's
// frames are built, and only the ended streams of batching routers join.
func (fb *frameBuilder) frames(outs []Output, batches func(conn uint64) bool, want bool) []serve.Tokens {
	fb.out, fb.first, fb.last, fb.hasLP = fb.out[:0], fb.first[:0], fb.last[:0], fb.hasLP[:0]
	fb.ids, fb.lps = slices.Grow(fb.ids[:0], len(outs)), fb.lps[:0] // never grows below: Tokens views stay put
	fb.next = slices.Grow(fb.next[:0], len(outs))[:len(outs)]
	if fb.open == nil {
		fb.open, fb.conns = map[serve.Key]int{}, map[uint64]bool{}
	}
	clear(fb.open)
	clear(fb.conns)
	lastConn, b := uint64(0), false // outputs of one connection come in runs
	for i := range outs {
		fb.next[i] = -1
		k := serve.Key(outs[i].Key)
		if i == 0 || k.Conn != lastConn {
			seen := false
			if b, seen = fb.conns[k.Conn]; !seen {
				b = batches(k.Conn)
				fb.conns[k.Conn] = b
			}
			lastConn = k.Conn
		}
		if b != want && fb.ended == nil { // a burst's frames are every router's
			continue
		}
		if f, ok := fb.open[k]; ok && b && (fb.ended == nil || fb.ended[k]) && (!outs[i].HasToken || outs[i].HasLogprob == fb.hasLP[f]) {
			fb.next[fb.last[f]], fb.last[f] = i, i
			continue
		}
		fb.open[k] = len(fb.first)
		fb.first, fb.last = append(fb.first, i), append(fb.last, i)
		fb.hasLP = append(fb.hasLP, outs[i].HasLogprob)
	}
	for f, i := range fb.first {
		fb.out = append(fb.out, fb.frame(outs, i, fb.hasLP[f]))
	}
	return fb.out
}

// frame is the frame of the outputs chained from outs[first] by fb.next,
// all of one stream, in order.
func (fb *frameBuilder) frame(outs []Output, first int, hasLP bool) serve.Tokens {
	t := serve.Tokens{Key: serve.Key(outs[first].Key)}
	start, lpStart := len(fb.ids), len(fb.lps)
	topN := 0
	for i := first; i >= 0; i = fb.next[i] {
		o := &outs[i]
		if o.HasToken {
			fb.ids = append(fb.ids, o.Token)
			if hasLP {
				fb.lps = append(fb.lps, o.Logprob)
				topN = len(o.Logprob.Top) // exactly TopLogprobs alternatives each, as sample gives them
			}
		}
		if o.First {
			t.Msg.Flags |= wire.TokFirst
			t.Msg.CachedTokens = uint32(o.Cached)
		}
		if o.Handoff != nil { // disagg.go
			t.Msg.Flags |= wire.TokHandoff
			t.Msg.KVTransfer = o.Handoff
		}
		if o.Finish != wire.FinishNone {
			t.Msg.Flags |= wire.TokLast
			t.Msg.Finish = o.Finish
			t.Msg.PromptTokens, t.Msg.CompletionTokens = uint32(o.PromptTokens), uint32(o.CompletionTokens)
		}
	}
	t.Msg.Tokens = wire.TokensOf(fb.ids[start:])
	if hasLP && len(fb.lps) > lpStart {
		if lps, err := wire.LogprobsOf(topN, fb.lps[lpStart:]); err == nil {
			t.Msg.Flags |= wire.TokLogprobs
			t.Msg.Logprobs = lps
		}
	}
	return t
}
