package sim

import (
	"cmp"
	"math"
	"slices"

	"github.com/kvgate/kvgate/wire"
)

// The simulator's sampler is deterministic: at each position it draws a
// fixed set of candidate tokens from the request's seed, the first being
// the token nextToken picks, with logits falling by a fixed step. With no
// sampling extras the first candidate is the output, as it always was;
// penalties and logit_bias adjust the logits and the best candidate wins
// (ties to the earlier); min_tokens takes EOS and stop tokens out until
// enough tokens are out. The candidates stand for the whole vocabulary's
// probability mass: logprobs are their log-softmax.

// Sampling are the GENERATE sampling extras (wire.Sampling) a simulated
// engine honours.
type Sampling struct {
	PresencePenalty, FrequencyPenalty float32
	RepetitionPenalty                 float32 // 1 (or 0): off
	MinTokens                         int
	Logprobs                          bool
	TopLogprobs                       int
	Bias                              map[uint32]float32
}

// SamplingOf copies a GENERATE's sampling section; nil without one.
func SamplingOf(g *wire.Generate) *Sampling {
	if g.Flags&wire.GenSampling == 0 {
		return nil
	}
	s := &g.Sampling
	out := &Sampling{PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty,
		RepetitionPenalty: s.RepetitionPenalty, MinTokens: int(s.MinTokens), Logprobs: s.Logprobs(),
		TopLogprobs: int(s.TopLogprobs)}
	if n := s.LogitBias.Len(); n > 0 {
		out.Bias = make(map[uint32]float32, n)
		for i := range n {
			t, b := s.LogitBias.At(i)
			out.Bias[t] = b
		}
	}
	return out
}

// Candidates per position (enough for wire.MaxTopLogprobs alternatives
// besides the chosen one), the first one's logit and the step between
// consecutive ones.
const (
	numCandidates = wire.MaxTopLogprobs + 1
	firstLogit    = 2.0
	logitStep     = 0.75
)

type candidate struct {
	token uint32
	logit float64
}

// sample returns r's next token, whether it ends the request (EOS), and
// its logprob entry when the request asked for logprobs.
func (c *Core) sample(r *Request) (tok uint32, eos bool, lp wire.LogprobEntry, hasLP bool) {
	tok, eos = c.nextOf(r)
	s := r.Params.Sampling
	if s == nil {
		return tok, eos, lp, false
	}
	cands := r.candidates(tok)
	early := r.generated < s.MinTokens
	for i := range cands {
		cd := &cands[i]
		if early && (cd.token == c.cfg.EOS || r.stopTokens[cd.token]) {
			cd.logit = math.Inf(-1)
			continue
		}
		cd.logit = r.penalize(cd.token, cd.logit+float64(s.Bias[cd.token]))
	}
	// Ranked best first, ties to the earlier candidate.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.logit, a.logit) })
	tok = cands[0].token
	eos = tok == c.cfg.EOS
	if !s.Logprobs {
		return tok, eos, lp, false
	}
	norm := logSumExp(cands)
	lp.Logprob = float32(cands[0].logit - norm)
	for _, cd := range cands[:min(s.TopLogprobs, len(cands))] {
		lp.Top = append(lp.Top, wire.Alt{Token: cd.token, Logprob: float32(cd.logit - norm)})
	}
	return tok, eos, lp, true
}

// candidates are the tokens r may take at its next position: first, the
// token generation would pick (first), then ones drawn from the seed, then
// any token logit_bias raises from outside them, at the lowest logit.
func (r *Request) candidates(first uint32) []candidate {
	cands := make([]candidate, 0, numCandidates+len(r.Params.Sampling.Bias))
	cands = append(cands, candidate{first, firstLogit})
	h := splitmix(r.seed ^ uint64(r.generated)*0x9E3779B97F4A7C15)
	for len(cands) < numCandidates {
		h = splitmix(h)
		t := uint32((h >> 8) % vocabSize)
		if !slices.ContainsFunc(cands, func(c candidate) bool { return c.token == t }) {
			cands = append(cands, candidate{t, firstLogit - logitStep*float64(len(cands))})
		}
	}
	lowest := cands[len(cands)-1].logit
	for t, b := range r.Params.Sampling.Bias {
		if b > 0 && !slices.ContainsFunc(cands, func(c candidate) bool { return c.token == t }) {
			cands = append(cands, candidate{t, lowest})
		}
	}
	// Map order must not reach the output: ties sort by token.
	extra := cands[numCandidates:]
	slices.SortFunc(extra, func(a, b candidate) int { return cmp.Compare(a.token, b.token) })
	return cands
}

// penalize applies the repetition penalty (vLLM's: over prompt and
// output, dividing a positive logit, multiplying a negative one), then the
// frequency and presence penalties (OpenAI's: over the output).
func (r *Request) penalize(tok uint32, logit float64) float64 {
	s := r.Params.Sampling
	rp := float64(s.RepetitionPenalty)
	repeat := rp != 0 && rp != 1
	if s.PresencePenalty == 0 && s.FrequencyPenalty == 0 && !repeat {
		return logit
	}
	r.countOutput()
	n := r.outCount[tok]
	if repeat && (n > 0 || r.inPrompt(tok)) {
		if logit > 0 {
			logit /= rp
		} else {
			logit *= rp
		}
	}
	if n > 0 {
		logit -= float64(s.PresencePenalty) + float64(s.FrequencyPenalty)*float64(n)
	}
	return logit
}

// countOutput folds the output tokens not yet counted into outCount.
func (r *Request) countOutput() {
	if r.outCount == nil {
		r.outCount = make(map[uint32]int)
	}
	for _, t := range r.tokens[r.promptLen+r.counted:] {
		r.outCount[t]++
	}
	r.counted = len(r.tokens) - r.promptLen
}

// inPrompt reports whether tok is in r's prompt (a set built once).
func (r *Request) inPrompt(tok uint32) bool {
	if r.promptSet == nil {
		r.promptSet = make(map[uint32]struct{}, r.promptLen)
		for _, t := range r.tokens[:r.promptLen] {
			r.promptSet[t] = struct{}{}
		}
	}
	_, ok := r.promptSet[tok]
	return ok
}

func logSumExp(cands []candidate) float64 {
	top := cands[0].logit
	sum := 0.0
	for _, c := range cands {
		sum += math.Exp(c.logit - top)
	}
	return top + math.Log(sum)
}
