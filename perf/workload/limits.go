package workload

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors of Parse, besides a trace file's own.
var (
	// ErrTooLarge: the SPEC or trace asks for more than a workload may
	// hold (limits), or for arrivals too far apart to represent.
	ErrTooLarge = errors.New("workload: too large")
	// ErrBadParameter: a generator parameter, or a trace's timestamp, is
	// out of its range.
	ErrBadParameter = errors.New("workload: parameter out of range")
)

// limits bound a workload, so that a SPEC with a stray exponent or a
// corrupt trace is refused with an error instead of exhausting memory.
type limits struct {
	tokens int // token ids drawn and held in prompts, all requests together
	// requests counts requests, and for the generators also the groups,
	// bursts or conversations they come in (each a loop of its own).
	requests int
}

// defaultLimits: 2^30 token ids (4 GiB; the whole Mooncake trace holds
// 61 M) and 2^24 requests.
var defaultLimits = limits{tokens: 1 << 30, requests: 1 << 24}

// maxSpan bounds the last arrival: time.Duration holds 292 years, and
// sums of arrival times must not overflow it.
const maxSpan = 100 * 365 * 24 * time.Hour

// add counts a request of n prompt tokens, the requests-th, against the
// limits.
func (lim limits) add(tokens *int, n, requests int) error {
	if n > lim.tokens-*tokens || requests > lim.requests {
		return fmt.Errorf("%w: over %d prompt tokens or %d requests", ErrTooLarge, lim.tokens, lim.requests)
	}
	*tokens += n
	return nil
}

// paramRanges says what each generator parameter may be.
var paramRanges = map[string]paramRange{
	"groups": countFrom1, "n": count, "bursts": count, "sessions": count, "agents": count,
	"turns": count, "steps": count, "prefix": count, "suffix": count, "system": count,
	"user": count, "result": count, "output": countFrom1,
	"rate": perSecond, "think": seconds, "warm": seconds, "spread": seconds, "gap": seconds,
	"seed": seed, "adapters": countFrom1, "zipf": exponent,
}

type paramRange int

const (
	count      paramRange = iota // a whole number of things, fractions dropped
	countFrom1                   // the same, at least 1 (a group to pick, a token to generate)
	perSecond                    // a rate above 0
	seconds                      // a time, 0 or more
	seed                         // a PCG seed: 0 up to 2^64
	exponent                     // a Zipf exponent: 0 (uniform) up to 16
)

// check refuses parameters out of range (which would panic, or convert to
// an integer in a platform's own way) and a workload over the limits,
// before any of it is generated. Unknown keys are left alone, as before.
func (p params) check(kind string, lim limits) error {
	for k, v := range p {
		r, known := paramRanges[k]
		ok := !known
		switch r {
		case count:
			ok = ok || v >= 0 && v <= math.MaxInt32
		case countFrom1:
			ok = ok || v >= 1 && v <= math.MaxInt32
		case perSecond:
			ok = ok || v > 0 && !math.IsInf(v, 1)
		case seconds:
			ok = ok || v >= 0 && !math.IsInf(v, 1)
		case seed:
			ok = ok || v >= 0 && v < 1<<64
		case exponent:
			ok = ok || v >= 0 && v <= 16
		}
		if !ok {
			return fmt.Errorf("%w: %s=%v", ErrBadParameter, k, v)
		}
	}
	if p.emptyPrompts(kind) {
		return fmt.Errorf("%w: the prompts would be empty", ErrBadParameter)
	}
	tokens, requests := p.size(kind)
	if tokens > float64(lim.tokens) || requests > float64(lim.requests) {
		return fmt.Errorf("%w: %.4g token ids and %.4g requests, over %d or %d", ErrTooLarge, tokens, requests, lim.tokens, lim.requests)
	}
	return nil
}

// size is what generate will make of p: the token ids it draws plus those
// its prompts hold, and its requests. It follows generate's defaults and
// loops; the fuzz test holds the two together.
func (p params) size(kind string) (tokens, requests float64) {
	drawn, held := p.promptSize(kind)
	reqs, loops := p.requestCount(kind)
	return drawn + held, reqs + loops
}

// whole reads a parameter as generate does, fractions dropped.
func (p params) whole(k string, def float64) float64 { return math.Trunc(p.get(k, def)) }

// promptSize counts the token ids generate draws and those its prompts
// hold.
func (p params) promptSize(kind string) (drawn, held float64) {
	get := p.whole
	switch kind {
	case "shared-prefix":
		prefix, suffix, n := get("prefix", 4096), get("suffix", 256), get("n", 1000)
		return get("groups", 8)*prefix + n*suffix, n * (prefix + suffix)
	case "multi-lora":
		prefix, suffix, n := get("prefix", 2048), get("suffix", 256), get("n", 2000)
		return get("adapters", 64)*prefix + n*suffix, n * (prefix + suffix)
	case "burst":
		prefix, suffix, per := get("prefix", 2048), get("suffix", 1024), get("n", 64)+1
		bursts := get("bursts", 1)
		return bursts * (prefix + per*suffix), bursts * per * (prefix + suffix)
	}
	units, steps, turnLen, turn := turnParams(kind)
	u, t := get(units, 64), get(steps, 8)
	system, user, output := get("system", 2048), get(turnLen, turn), get("output", 128)
	// Turn i (from 1) holds the system prompt, i turns and i-1 answers.
	return u * (system + t*(user+output)), u * (t*system + user*t*(t+1)/2 + output*t*(t-1)/2)
}

// emptyPrompts says whether the first prompt of each group, burst or
// conversation, and so every prompt, has no tokens: no engine takes one.
func (p params) emptyPrompts(kind string) bool {
	get := p.whole
	switch kind {
	case "shared-prefix":
		return get("prefix", 4096)+get("suffix", 256) == 0
	case "burst":
		return get("prefix", 2048)+get("suffix", 1024) == 0
	case "multi-lora":
		return get("prefix", 2048)+get("suffix", 256) == 0
	}
	_, _, turnLen, turn := turnParams(kind)
	return get("system", 2048)+get(turnLen, turn) == 0
}

// requestCount counts the requests generate makes, and the groups,
// bursts or conversations it makes them in.
func (p params) requestCount(kind string) (requests, loops float64) {
	get := p.whole
	switch kind {
	case "shared-prefix":
		return get("n", 1000), get("groups", 8)
	case "burst":
		return get("bursts", 1) * (get("n", 64) + 1), get("bursts", 1)
	case "multi-lora":
		return get("n", 2000), get("adapters", 64)
	}
	units, steps, _, _ := turnParams(kind)
	return get(units, 64) * get(steps, 8), get(units, 64)
}

// turnParams names multi-turn's and agentic's parameters.
func turnParams(kind string) (units, steps, turnLen string, turn float64) {
	if kind == "agentic" {
		return "agents", "steps", "result", 1024
	}
	return "sessions", "turns", "user", 256
}

// timeline makes arrival times, remembering (tooLong) when one would lie
// past maxSpan: adding time.Durations could overflow before that.
type timeline struct{ tooLong bool }

// after returns at moved on by sec seconds (sec >= 0).
func (tl *timeline) after(at time.Duration, sec float64) time.Duration {
	if !(sec <= (maxSpan - at).Seconds()) {
		tl.tooLong = true
		return at
	}
	return at + time.Duration(sec*float64(time.Second))
}
