// Package workload turns a workload SPEC into a schedule of requests with
// token-id prompts: Mooncake and Azure traces, and seeded generators of
// shared-prefix, multi-turn and agentic traffic.
package workload

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Request is one request of a workload.
type Request struct {
	// At is the arrival time from the start of the run (before --speed).
	At time.Duration
	// Prompt are the prompt's token ids.
	Prompt []uint32
	// Output is how many tokens to generate (max_tokens with ignore_eos).
	Output int
	// Session groups a conversation (for the session policy).
	Session string
	// LoRA is the adapter the request runs with (0: the base model).
	LoRA uint32
}

// Workload is a parsed SPEC.
type Workload struct {
	Spec     string
	Requests []Request
}

// vocab bounds generated token ids (ordinary tokens of Qwen's vocabulary).
const vocab = 151643

// Parse reads a SPEC: mooncake:PATH, azure:PATH, or
// shared-prefix|multi-turn|agentic|burst|multi-lora[:key=value,...]. A SPEC or trace
// that asks for more than a workload may hold (see limits.go) is refused
// with ErrTooLarge, a parameter out of its range with ErrBadParameter.
func Parse(spec string) (*Workload, error) { return parse(spec, defaultLimits) }

func parse(spec string, lim limits) (*Workload, error) {
	kind, args, _ := strings.Cut(spec, ":")
	var reqs []Request
	var err error
	switch kind {
	case "mooncake":
		reqs, err = mooncake(args, lim)
	case "azure":
		reqs, err = azure(args, lim)
	case "shared-prefix", "multi-turn", "agentic", "burst", "multi-lora":
		var p params
		if p, err = parseParams(args); err == nil {
			if err = p.check(kind, lim); err == nil {
				reqs, err = generate(kind, p)
			}
		}
	default:
		return nil, fmt.Errorf("workload: unknown kind %q (mooncake:PATH, azure:PATH, shared-prefix, multi-turn, agentic, burst, multi-lora)", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", spec, err)
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].At < reqs[j].At })
	return &Workload{Spec: spec, Requests: reqs}, nil
}

// Denser divides every arrival time by factor: the same requests arrive
// factor times as fast while the engines keep their speed, which raises the
// offered load by that factor. A factor of 1 (or less than 0) changes nothing.
func (w *Workload) Denser(factor float64) {
	if factor <= 0 || factor == 1 {
		return
	}
	for i := range w.Requests {
		w.Requests[i].At = time.Duration(float64(w.Requests[i].At) / factor)
	}
}

// Prefix keeps the first n requests in arrival order (a shorter replay of
// a long trace); n of 0, or at least the workload's length, keeps all.
func (w *Workload) Prefix(n int) {
	if n > 0 && n < len(w.Requests) {
		w.Requests = w.Requests[:n]
		w.Spec = fmt.Sprintf("%s (first %d requests)", w.Spec, n)
	}
}

// blockTokens expands a Mooncake hash id into its 512 deterministic tokens.
func blockTokens(dst []uint32, id int64) []uint32 {
	x := uint64(id)*0x9E3779B97F4A7C15 + 0x6b7667617465
	for range 512 {
		x ^= x >> 30
		x *= 0xBF58476D1CE4E5B9
		x ^= x >> 27
		x *= 0x94D049BB133111EB
		x ^= x >> 31
		dst = append(dst, uint32(x%vocab))
	}
	return dst
}

func mooncake(path string, lim limits) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	var tokens int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var r struct {
			Timestamp    float64 `json:"timestamp"`
			InputLength  int     `json:"input_length"`
			OutputLength int     `json:"output_length"`
			HashIDs      []int64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if r.InputLength > 0 {
			if err := lim.add(&tokens, r.InputLength, len(out)+1); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		if !(r.Timestamp >= 0 && r.Timestamp <= float64(maxSpan.Milliseconds())) {
			return nil, fmt.Errorf("line %d: timestamp %v ms: %w", n, r.Timestamp, ErrBadParameter)
		}
		need := (r.InputLength + 511) / 512 // the blocks the prompt reaches into
		if r.InputLength <= 0 || len(r.HashIDs) < need {
			return nil, fmt.Errorf("line %d: %d hash ids cannot cover %d tokens", n, len(r.HashIDs), r.InputLength)
		}
		prompt := make([]uint32, 0, need*512)
		for _, id := range r.HashIDs[:need] { // blocks past the prompt's end would be cut off
			prompt = blockTokens(prompt, id)
		}
		out = append(out, Request{At: time.Duration(r.Timestamp * float64(time.Millisecond)), Prompt: prompt[:r.InputLength],
			Output: max(r.OutputLength, 1)})
	}
	return out, sc.Err()
}

func azure(path string, lim limits) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var out []Request
	var tokens int
	var t0 time.Time
	for i, row := range rows {
		if i == 0 || len(row) < 3 {
			continue // header
		}
		ts, err := time.Parse("2006-01-02 15:04:05.0000000", strings.TrimSpace(row[0]))
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if t0.IsZero() {
			t0 = ts
		}
		in, err1 := strconv.Atoi(row[1])
		gen, err2 := strconv.Atoi(row[2])
		if err1 != nil || err2 != nil || in <= 0 {
			return nil, fmt.Errorf("row %d: bad lengths", i)
		}
		if err := lim.add(&tokens, in, len(out)+1); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		prompt := make([]uint32, in) // no shared prefixes: every prompt is random
		for j := range prompt {
			prompt[j] = uint32(rng.IntN(vocab))
		}
		out = append(out, Request{At: ts.Sub(t0), Prompt: prompt, Output: max(gen, 1)})
	}
	return out, nil
}

type params map[string]float64

func parseParams(s string) (params, error) {
	p := params{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("parameter %q: want key=number", kv)
		}
		p[k] = f
	}
	return p, nil
}

func (p params) get(k string, def float64) float64 {
	if v, ok := p[k]; ok {
		return v
	}
	return def
}

// generate builds the synthetic workloads:
//   - shared-prefix: groups of requests sharing a system prompt
//     (groups, prefix, suffix, n, rate, output, seed);
//   - multi-turn: conversations whose history grows by a user turn and the
//     answer each turn, with think time between turns
//     (sessions, turns, system, user, output, think, rate, seed);
//   - agentic: tool loops appending a tool result and calling again
//     (agents, steps, system, result, output, think, rate, seed);
//   - burst: a hot prefix, then many requests sharing it at the same
//     instant, the herding test of replicated routers: per burst one
//     request warms one engine's cache, and warm seconds later n requests
//     (prefix + their own suffix) arrive at once, or evenly over spread
//     seconds; bursts repeat every gap seconds with a new prefix (bursts,
//     prefix, suffix, n, warm, spread, gap, output, seed);
//   - multi-lora: Zipf-popular LoRA adapters, each with its own shared
//     prefix (lora.go).
//
// The parameters are checked first (params.check), so every count fits an
// int and the tokens fit the limits; arrival times are checked as they are
// made (timeline).
func generate(kind string, p params) ([]Request, error) {
	var tl timeline
	rng := rand.New(rand.NewPCG(uint64(p.get("seed", 1)), 7))
	randTokens := func(n int) []uint32 {
		t := make([]uint32, n)
		for i := range t {
			t[i] = uint32(rng.IntN(vocab))
		}
		return t
	}
	rate := p.get("rate", 4) // new groups / conversations per second
	var out []Request
	switch kind {
	case "shared-prefix":
		groups := int(p.get("groups", 8))
		prefixes := make([][]uint32, groups)
		for i := range prefixes {
			prefixes[i] = randTokens(int(p.get("prefix", 4096)))
		}
		var at time.Duration
		for i := range int(p.get("n", 1000)) {
			at = tl.after(at, rng.ExpFloat64()/rate)
			g := rng.IntN(groups)
			prompt := append(append([]uint32(nil), prefixes[g]...), randTokens(int(p.get("suffix", 256)))...)
			out = append(out, Request{At: at, Prompt: prompt, Output: int(p.get("output", 64)),
				Session: fmt.Sprintf("g%d-%d", g, i)})
		}
	case "burst":
		at := time.Duration(0)
		for b := range int(p.get("bursts", 1)) {
			prefix := randTokens(int(p.get("prefix", 2048)))
			req := func(at time.Duration, i int) Request {
				prompt := append(append([]uint32(nil), prefix...), randTokens(int(p.get("suffix", 1024)))...)
				return Request{At: at, Prompt: prompt, Output: int(p.get("output", 32)), Session: fmt.Sprintf("burst%d-%d", b, i)}
			}
			out = append(out, req(at, -1))
			hit := tl.after(at, p.get("warm", 1))
			n := int(p.get("n", 64))
			spread := tl.after(hit, p.get("spread", 0)) - hit
			if n > 0 && spread > math.MaxInt64/time.Duration(n) { // spread*i below would overflow
				tl.tooLong = true
				break
			}
			for i := range n {
				out = append(out, req(hit+spread*time.Duration(i)/time.Duration(n), i))
			}
			at = tl.after(hit, p.get("gap", 3))
		}
	case "multi-lora":
		out = multiLoRA(p, rng, randTokens, &tl)
	case "multi-turn", "agentic":
		units, steps, turnLen, turn := turnParams(kind)
		var start time.Duration
		for s := range int(p.get(units, 64)) {
			start = tl.after(start, rng.ExpFloat64()/rate)
			history := randTokens(int(p.get("system", 2048)))
			at := start
			for range int(p.get(steps, 8)) {
				history = append(history, randTokens(int(p.get(turnLen, turn)))...)
				output := int(p.get("output", 128))
				out = append(out, Request{At: at, Prompt: append([]uint32(nil), history...), Output: output,
					Session: fmt.Sprintf("%s-%d", kind, s)})
				history = append(history, randTokens(output)...) // the answer joins the history
				at = tl.after(at, p.get("think", 2)+rng.ExpFloat64())
			}
		}
	}
	if tl.tooLong {
		return nil, fmt.Errorf("%w: arrivals span more than %v", ErrTooLarge, maxSpan)
	}
	return out, nil
}
