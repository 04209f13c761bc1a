package llamacpp

import (
	"bytes"
	"errors"
	"slices"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// errStopToken ends a stream at one of the request's stop token ids, the
// last frame sent; the HTTP request is then closed, which stops llama.cpp.
var errStopToken = errors.New("llamacpp: stop token")

// relay turns one request's events into TOKENS frames and tells the
// cache view what the request did to the cache. It lives on the
// request's goroutine.
type relay struct {
	e        *Engine
	k        serve.Key
	id       uint64
	prompt   []uint32
	stops    []uint32
	wantText bool

	gen       []uint32 // ids sent to the router
	known     int      // gen[:known] are the server's ids, in place
	faithful  bool     // no id left out was guessed or lost so far
	seen      int      // tokens_predicted of the last event
	tail      []byte   // the last bytes (up to 3) of the content so far
	sentFirst bool
	held      bool
}

// event relays one event.
func (r *relay) event(ev *event) error {
	ids := ev.Tokens
	if k := ev.TokensPredicted - r.seen - len(ids); k > 0 {
		ids = r.recover(ev, k)
	}
	r.seen = max(r.seen, ev.TokensPredicted)
	if !r.held && r.e.cache != nil {
		r.held = true
		r.e.cache.held(r.id, r.prompt)
	}
	m := wire.TokensMsg{}
	stopped, cut := false, false
	if i := slices.IndexFunc(ids, func(id uint32) bool { return slices.Contains(r.stops, id) }); i >= 0 {
		ids, stopped, cut = ids[:i+1], true, i < len(ids)-1
	}
	m.Tokens = wire.TokensOf(ids)
	if r.wantText && !cut { // the content spells the event's ids, all of them
		m.Text = []byte(ev.Content)
	}
	if !r.sentFirst {
		m.Flags, r.sentFirst = wire.TokFirst, true
		if ev.Timings != nil {
			m.CachedTokens = uint32(min(ev.Timings.CacheN, len(r.prompt)))
		}
	}
	r.gen = append(r.gen, ids...)
	if r.faithful {
		r.known = len(r.gen)
	}
	r.tail = append(r.tail, ev.Content...)
	r.tail = r.tail[max(0, len(r.tail)-3):]
	switch {
	case stopped:
		m.Flags |= wire.TokLast
		m.Finish, m.PromptTokens, m.CompletionTokens = wire.FinishStop, uint32(len(r.prompt)), uint32(len(r.gen))
		r.e.Out.Deliver([]serve.Tokens{{Key: r.k, Msg: m}})
		return errStopToken
	case ev.Stop:
		m.Flags |= wire.TokLast
		m.Finish, m.PromptTokens, m.CompletionTokens = finishOf(ev.StopType), uint32(ev.TokensEvaluated), uint32(ev.TokensPredicted)
		r.e.Out.Deliver([]serve.Tokens{{Key: r.k, Msg: m}})
		r.settle(ev)
	case len(ids) > 0:
		r.e.Out.Deliver([]serve.Tokens{{Key: r.k, Msg: m}})
	default:
		if m.Flags&wire.TokFirst != 0 {
			r.sentFirst = false // nothing sent yet: the next frame is the first
		}
	}
	return nil
}

// recover returns the event's ids with the k left out before them, as
// far as they can be known, and counts what became of them.
func (r *relay) recover(ev *event, k int) []uint32 {
	c := &r.e.ids
	if p := r.e.Pieces; p != nil && !ev.Stop {
		text := []byte(ev.Content)
		for _, specials := range []bool{false, true} {
			suffix := p.Spell(nil, ev.Tokens, specials)
			if !bytes.HasSuffix(text, suffix) {
				continue
			}
			if ids, exact, ok := p.Recover(nil, r.tail, text[:len(text)-len(suffix)], k); ok {
				if exact {
					c.recovered.Add(uint64(k))
				} else {
					c.guessed.Add(uint64(k))
					r.faithful = false
				}
				return append(ids, ev.Tokens...)
			}
		}
	}
	c.lost.Add(uint64(k))
	r.faithful = false
	return ev.Tokens
}

// settle tells the cache view where the request ended and what it left
// there: prompt and generated ids, as many as the server says it cached,
// of those the bridge knows in place. A context shift (truncated) moved
// tokens around: the slot's content is then not known.
func (r *relay) settle(ev *event) {
	if r.e.cache == nil {
		return
	}
	var tokens []uint32
	if !ev.Truncated {
		tokens = append(append(tokens, r.prompt...), r.gen[:r.known]...)
		tokens = tokens[:min(len(tokens), ev.TokensCached)]
	}
	r.e.cache.settled(r.id, ev.IDSlot, tokens, ev.TokensCached)
}

// orphan tells the cache view the request ended without a last event.
func (r *relay) orphan() {
	if r.e.cache != nil && r.held {
		r.e.cache.ended(r.id, append(append([]uint32(nil), r.prompt...), r.gen[:r.known]...))
	}
}

func finishOf(stopType string) wire.FinishReason {
	if stopType == "limit" {
		return wire.FinishLength
	}
	return wire.FinishStop // "eos", "word"
}
