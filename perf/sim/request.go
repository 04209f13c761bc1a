package sim

import (
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Request is one generation request inside a simulated engine rank.
type Request struct {
	// Key identifies the request to its submitter (connection and stream).
	Key RequestKey
	// Params are the sampling parameters.
	Params Params
	// Keys are the extra hash keys (LoRA, salt, multimodal items).
	Keys kvstore.Keys

	tokens     []uint32 // prompt, then generated tokens
	promptLen  int
	hashes     []uint64 // chained hashes of the full blocks of tokens
	table      []int32  // GPU blocks holding tokens[0 : len(table)*B]
	computed   int      // tokens whose KV is in the cache
	target     int      // tokens to prefill before the next token comes out
	generated  int
	cached     int  // prompt tokens served from cache at first admission
	admitted   bool // has ever run (cached is set)
	started    bool // has produced its first token
	finished   bool // has ended: no longer the core's (Core.finish)
	seed       uint64
	stopTokens map[uint32]bool
	script     []uint32 // the answer ToolCalls scripted (toolcall.go)
	scripted   bool
	// outCount counts the first counted output tokens, promptSet holds the
	// prompt's: the penalties' state (sampling.go), built when needed.
	outCount  map[uint32]int
	counted   int
	promptSet map[uint32]struct{}
	arrival   uint64 // admission order, for preemption (newest first)
	// loading is how long until the blocks it loads from lower tiers are
	// on the GPU; it is not computed before.
	loading time.Duration
	// handoff is its part of a prefill/decode hand-off, nil: none (disagg.go).
	handoff *handoff
}

// RequestKey identifies a request to whoever submitted it.
type RequestKey struct {
	Conn   uint64
	Stream uint32
}

// Params are the sampling parameters a simulated engine honours.
type Params struct {
	MaxTokens  int
	IgnoreEOS  bool
	StopTokens []uint32
	Seed       uint64
	HasSeed    bool
	RequestID  string
	// Sampling are the extras of GENERATE's sampling section; nil: none.
	Sampling *Sampling
	// Traceparent is the W3C trace context of GENERATE's trace section
	// (wire.FeatureTrace): the router's span this request's work belongs
	// to. The simulator makes no spans; it logs it with the request.
	// Empty: none.
	Traceparent string
}

// NewRequest builds a request for prompt (copied).
func NewRequest(key RequestKey, prompt []uint32, params Params, keys kvstore.Keys) *Request {
	seed := params.Seed
	if !params.HasSeed {
		seed = seedOf(params.RequestID, prompt)
	}
	return newRequest(key, append(make([]uint32, 0, len(prompt)+answerRoom(params.MaxTokens)), prompt...), seed, params, keys)
}

// newRequest builds a request that takes tokens, its prompt, and samples
// with seed.
func newRequest(key RequestKey, tokens []uint32, seed uint64, params Params, keys kvstore.Keys) *Request {
	r := &Request{Key: key, Params: params, Keys: keys, tokens: tokens, promptLen: len(tokens), seed: seed}
	if len(params.StopTokens) > 0 {
		r.stopTokens = make(map[uint32]bool, len(params.StopTokens))
		for _, t := range params.StopTokens {
			r.stopTokens[t] = true
		}
	}
	return r
}

// answerRoom is how many generated tokens a request's array has room for
// at first: its max_tokens, but no more than maxAnswerRoom (a GENERATE may
// ask for four billion; the array grows if a request gets that far).
func answerRoom(maxTokens int) int { return min(max(maxTokens, 0), maxAnswerRoom) }

const maxAnswerRoom = 1 << 14

// Output is what one step produced for one request.
type Output struct {
	Key RequestKey
	// Token is the generated token (valid unless Finish is FinishCancelled).
	Token uint32
	// HasToken is false for the last frame of a cancelled request.
	HasToken bool
	// First marks the request's first token; Cached is valid with it.
	First  bool
	Cached int
	// Finish is set on the last output; usage comes with it.
	Finish           wire.FinishReason
	PromptTokens     int
	CompletionTokens int
	// Logprob is Token's logprob entry, when HasLogprob (the request asked
	// for logprobs).
	Logprob    wire.LogprobEntry
	HasLogprob bool
	// Handoff, on a prefill-side request's first token, are the transfer
	// parameters it hands over (TOKENS flag HANDOFF, disagg.go).
	Handoff []byte
}

// traceparentOf is the traceparent of g's trace section, "" without one.
func traceparentOf(g *wire.Generate) string {
	if g.Flags&wire.GenTrace == 0 {
		return ""
	}
	return g.Trace.Traceparent()
}

// keysOf takes the hash keys of a GENERATE (copied out of the frame).
func keysOf(g *wire.Generate) kvstore.Keys {
	k := kvstore.Keys{LoRAID: g.LoRAID}
	if len(g.CacheSalt) > 0 {
		k.CacheSalt = append([]byte(nil), g.CacheSalt...)
	}
	for i := range g.MMItems.Len() {
		it := g.MMItems.At(i)
		k.MM = append(k.MM, kvstore.MMItem{Offset: it.Offset, Length: it.Length, Hash: it.Hash})
	}
	return k
}
