//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/perf/gguf"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// The fleet tests run kvgate in front of two real llama-servers serving
// one random-weight model: through two kvgate-bridge --engine-kind
// llamacpp, and as --http-engine engines. What they check is read from
// llama.cpp itself where it can be: its own completions for the same ids,
// its own cache counters (cached_tokens, llamacpp:prompt_tokens_cached_total,
// llamacpp:tokens_predicted_total).

// llamaNode is one llama-server of a fleet and, when it has one, its
// bridge's engine id and wire address.
type llamaNode struct {
	srv    *llamacpp.Server
	id     string
	bridge string
}

// startLlamaServers runs n llama-servers serving one model file, each with
// two slots of 4,096 tokens and one thread.
func startLlamaServers(t *testing.T, n int) []*llamaNode {
	t.Helper()
	bin := llamacpptest.Binary(t) // skips (or fails) before the model is written
	path := llamacpptest.Model(t, gguf.Defaults())
	nodes := make([]*llamaNode, n)
	for i := range nodes {
		nodes[i] = &llamaNode{srv: llamacpptest.Start(t, llamacpp.Config{Binary: bin, Model: path, Parallel: 2, CtxSize: 8192,
			Threads: 1, ReadyTimeout: 3 * time.Minute, Args: []string{"--alias", model}})}
	}
	return nodes
}

// startLlamaFleet runs two llama-servers, a bridge in front of each
// (engine ids llama-0 and llama-1) and kvgate in front of the bridges;
// it returns the nodes and kvgate's base URL, ready.
func startLlamaFleet(t *testing.T, args ...string) ([]*llamaNode, string) {
	t.Helper()
	nodes := startLlamaServers(t, 2)
	var addrs []string
	for i, n := range nodes {
		n.id = fmt.Sprintf("llama-%d", i)
		n.bridge = startLlamaBridge(t, n.srv.URL, "--id", n.id)
		addrs = append(addrs, n.bridge)
	}
	_, base := startKvgate(t, append([]string{"--engine", strings.Join(addrs, ",")}, args...)...)
	waitReady(t, base)
	return nodes, base
}

// nodeOf returns the node whose bridge is engine id, or fails t.
func nodeOf(t *testing.T, nodes []*llamaNode, id string) *llamaNode {
	t.Helper()
	for _, n := range nodes {
		if n.id == id {
			return n
		}
	}
	t.Fatalf("x-kvgate-engine %q is none of the fleet's bridges", id)
	return nil
}

// kvgateTokens is what kvgate's /tokenize makes of body: a conversation
// rendered with the model's chat template, or a prompt.
func kvgateTokens(t *testing.T, base string, body map[string]any) []uint32 {
	t.Helper()
	resp, b := post(t, base+"/tokenize", body)
	var out struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK || len(out.Tokens) == 0 {
		t.Fatalf("kvgate /tokenize: %d %v %s", resp.StatusCode, err, b)
	}
	return out.Tokens
}

// llamaDirect asks llama.cpp's /completion directly for n tokens after
// the prompt ids, sampling as the bridge asks it to for c.
func llamaDirect(t *testing.T, url string, prompt []uint32, n int, c apiCall) llamaCompletion {
	t.Helper()
	req := map[string]any{
		"prompt": prompt, "n_predict": n, "temperature": c.temperature, "top_k": 0, "top_p": 1, "min_p": 0,
		"cache_prompt": true, "ignore_eos": c.ignoreEOS,
	}
	if c.seed != 0 {
		req["seed"] = c.seed
	}
	resp, body := post(t, url+"/completion", req)
	var out llamaCompletion
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("llama.cpp /completion: %d %v %s", resp.StatusCode, err, body)
	}
	return out
}

// llamaCounters reads llama.cpp's own counters from its /metrics.
func llamaCounters(t *testing.T, url string) map[string]float64 {
	t.Helper()
	r, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m[strings.TrimPrefix(name, "llamacpp:")] = f
		}
	}
	if r.StatusCode != http.StatusOK || len(m) == 0 {
		t.Fatalf("llama.cpp /metrics: %d, %d counters", r.StatusCode, len(m))
	}
	return m
}

// apiCall is one request to kvgate and how to read its answer's text.
type apiCall struct {
	name, path string
	body       map[string]any
	// What the request asks for and llama.cpp is asked for directly:
	// ignore_eos (OpenAI's vLLM extension; the Messages API has none), the
	// temperature and the seed (0: none; the Messages API has none).
	ignoreEOS   bool
	temperature float64
	seed        int
}

// answer is what a response through kvgate says: its text, prompt and
// completion tokens as kvgate reports them, the engine and the status.
type answer struct {
	status             int
	engine, text       string
	prompt, completion int
	raw                []byte
}

// readAnswer reads the text and usage of an OpenAI or Anthropic answer,
// whole or streamed.
func readAnswer(t *testing.T, resp *http.Response, body []byte, stream bool) answer {
	t.Helper()
	a := answer{status: resp.StatusCode, engine: resp.Header.Get("x-kvgate-engine"), raw: body}
	var chunks [][]byte
	if stream {
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("a stream as %q: %s", ct, body)
		}
		events := sseEvents(t, body)
		if len(events) == 0 {
			t.Fatalf("empty stream: %s", body)
		}
		for _, ev := range events {
			if ev != "[DONE]" {
				chunks = append(chunks, []byte(ev))
			}
		}
	} else {
		chunks = [][]byte{body}
	}
	var text strings.Builder
	for _, c := range chunks {
		var m struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
				Delta   struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
				InputTokens      int `json:"input_tokens"`
				OutputTokens     int `json:"output_tokens"`
			} `json:"usage"`
			Content []struct {
				Type, Text string
			} `json:"content"`
			Delta struct{ Type, Text string } `json:"delta"`
			// message_start carries the Messages API's input usage.
			Message *struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
		}
		if err := json.Unmarshal(c, &m); err != nil {
			t.Fatalf("%v: %s", err, c)
		}
		for _, ch := range m.Choices {
			text.WriteString(ch.Message.Content + ch.Delta.Content)
		}
		for _, b := range m.Content {
			text.WriteString(b.Text)
		}
		if m.Delta.Type == "text_delta" {
			text.WriteString(m.Delta.Text)
		}
		if m.Message != nil && m.Message.Usage.InputTokens > 0 {
			a.prompt = m.Message.Usage.InputTokens
		}
		if u := m.Usage; u != nil {
			a.prompt = max(a.prompt, u.PromptTokens, u.InputTokens)
			a.completion = max(a.completion, u.CompletionTokens, u.OutputTokens)
		}
	}
	a.text = text.String()
	return a
}

// TestLlamaCppFleetAPIs: kvgate -> two bridges -> two llama-servers. Chat
// completions and Anthropic messages, whole and streamed, with greedy
// sampling and a fixed seed (and one chat with a seeded temperature): the
// text through kvgate is the text llama.cpp gives when asked directly for
// the ids kvgate's /tokenize renders the conversation to; llama.cpp's
// prompt cache then holds all those ids (what the bridge sent it was them
// exactly), and kvgate's usage counts them. (Completions are
// TestBridgeToLlamaCpp's.) The random model's greedy text hardly depends
// on the prompt (its weights steer it onto whole-UTF-8 tokens), so the
// cache, not the text, is what shows the prompt arrived intact; the text
// shows the sampling did, the seeded case the seed.
func TestLlamaCppFleetAPIs(t *testing.T) {
	nodes, base := startLlamaFleet(t)
	// Each case its own system prompt, so no case shares a block with
	// another and each goes to either engine.
	system := func(q string) string { return q + " You are a terse assistant. Answer in one line." }
	msgs := func(q string) []any { return []any{map[string]any{"role": "user", "content": q}} }
	chat := func(q string, stream bool, temperature float64, seed int) map[string]any {
		b := map[string]any{"model": model, "max_tokens": 8, "temperature": temperature, "seed": seed, "ignore_eos": true, "stream": stream,
			"messages": append([]any{map[string]any{"role": "system", "content": system(q)}}, msgs(q)...)}
		if stream {
			b["stream_options"] = map[string]any{"include_usage": true}
		}
		return b
	}
	anthropic := func(q string, stream bool) map[string]any {
		return map[string]any{"model": model, "max_tokens": 8, "temperature": 0, "stream": stream, "system": system(q), "messages": msgs(q)}
	}
	cases := []apiCall{
		{"chat", "/v1/chat/completions", chat("Which engine holds my prefix?", false, 0, 1), true, 0, 1},
		{"chat-stream", "/v1/chat/completions", chat("How are blocks hashed?", true, 0, 1), true, 0, 1},
		{"chat-stream-seeded", "/v1/chat/completions", chat("What is a near-tie?", true, 1, 7), true, 1, 7},
		{"messages", "/v1/messages", anthropic("What does a bridge do?", false), false, 0, 0},
		{"messages-stream", "/v1/messages", anthropic("Why route by prefix?", true), false, 0, 0},
	}
	served := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream := c.body["stream"].(bool)
			// The conversation as the chat template renders it: the
			// Messages API's system prompt is the first message.
			conv := c.body["messages"].([]any)
			if s, ok := c.body["system"].(string); ok {
				conv = append([]any{map[string]any{"role": "system", "content": s}}, conv...)
			}
			tok := map[string]any{"model": model, "messages": conv}
			if c.path == "/v1/messages" {
				// A Messages request without `thinking` has thinking off
				// (the API's default), which Qwen3's template renders as
				// an empty think block after the generation prompt.
				tok["chat_template_kwargs"] = map[string]any{"enable_thinking": false}
			}
			ids := kvgateTokens(t, base, tok)
			resp, body := post(t, base+c.path, c.body)
			got := readAnswer(t, resp, body, stream)
			if got.status != http.StatusOK {
				t.Fatalf("%d %s", got.status, body)
			}
			n := nodeOf(t, nodes, got.engine)
			served[n.id] = true
			direct := llamaDirect(t, n.srv.URL, ids, 8, c)
			if got.text != direct.Content || direct.Content == "" {
				t.Fatalf("through kvgate (%s) %q, llama.cpp directly %q\n%s", got.engine, got.text, direct.Content, body)
			}
			if direct.Timings.CacheN < len(ids)-1 {
				t.Fatalf("asked directly for the %d ids kvgate renders, the server that served kvgate's request had %d of them cached: "+
					"the bridge sent it other ids", len(ids), direct.Timings.CacheN)
			}
			if got.prompt != len(ids) || got.completion != direct.TokensPredicted {
				t.Fatalf("usage: %d prompt and %d completion tokens through kvgate, %d rendered by /tokenize and %d generated directly\n%s",
					got.prompt, got.completion, len(ids), direct.TokensPredicted, body)
			}
			// The other server, same model, same sampling: the same text,
			// so the fleet answers alike whichever engine serves.
			other := nodes[0]
			if other == n {
				other = nodes[1]
			}
			if o := llamaDirect(t, other.srv.URL, ids, 8, c); o.Content != direct.Content {
				t.Fatalf("the two servers differ: %q and %q", direct.Content, o.Content)
			}
			t.Logf("%s: %q", got.engine, got.text)
		})
	}
	t.Logf("engines that served: %v", served)
}

// longPrefix is a text of about n tokens, its start distinct for each tag.
func longPrefix(tok *tokenize.Tokenizer, tag string, n int) (string, int) {
	var b strings.Builder
	for i := 0; len(tok.Encode(nil, b.String(), false)) < n; i++ {
		fmt.Fprintf(&b, "%s, paragraph %d: the router sends each prompt to the engine that holds its prefix; "+
			"func f(x int) int { return x*x + %d } // 東京 🍕\n", tag, i, i)
	}
	return b.String(), len(tok.Encode(nil, b.String(), false))
}

// stickScenario sends three long prefixes (about 2,500 tokens each) to
// kvgate, each once and then three times more with another question after
// it, and checks that every repeat goes to the server the first went to:
// the server named by serverOf, whose own counters say it served the
// repeats from its prompt cache (cached_tokens in the answer, and
// llamacpp:prompt_tokens_cached_total), while the other server's did not
// grow. A router that ignored prefixes would pass by chance once in 2^9.
// It returns the servers that hold a prefix.
func stickScenario(t *testing.T, nodes []*llamaNode, base, tag string, serverOf func(*http.Response) *llamaNode) map[*llamaNode]int {
	t.Helper()
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	held := map[*llamaNode]int{}
	for p := range 3 {
		prefix, n := longPrefix(tok, fmt.Sprintf("%s document %d", tag, p), 2500)
		before := map[*llamaNode]float64{}
		for _, nd := range nodes {
			before[nd] = llamaCounters(t, nd.srv.URL)["prompt_tokens_cached_total"]
		}
		var holder *llamaNode
		for r := range 4 {
			resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "max_tokens": 2, "temperature": 0,
				"prompt": prefix + fmt.Sprintf("Question %d: which engine holds this?", r)})
			var out struct {
				Usage usage `json:"usage"`
			}
			if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("prefix %d request %d: %d %v %s", p, r, resp.StatusCode, err, body)
			}
			got := serverOf(resp)
			if r == 0 {
				holder = got
				held[holder]++
				continue
			}
			if got != holder {
				t.Fatalf("prefix %d (%d tokens), repeat %d went to %s; the prefix is on %s", p, n, r, got.srv.URL, holder.srv.URL)
			}
			if out.Usage.Details.Cached < n-32 {
				t.Fatalf("prefix %d repeat %d: llama.cpp reports %d of %d prompt tokens cached, the prefix is %d", p, r,
					out.Usage.Details.Cached, out.Usage.PromptTokens, n)
			}
		}
		// llama.cpp's counters: the holder served 3 repeats of an n-token
		// prefix from its cache; the other server cached nothing of it.
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			for _, nd := range nodes {
				d := llamaCounters(t, nd.srv.URL)["prompt_tokens_cached_total"] - before[nd]
				switch {
				case nd == holder && d < float64(3*(n-32)):
					return fmt.Errorf("prefix %d: the holder %s counts %.0f prompt tokens cached, want 3 repeats of %d", p, nd.srv.URL, d, n)
				case nd != holder && d > float64(n/2):
					return fmt.Errorf("prefix %d: %s, which does not hold it, counts %.0f prompt tokens cached", p, nd.srv.URL, d)
				}
			}
			return nil
		})
	}
	return held
}

// indexEngine is one engine of the index in /debug/state.
type indexEngine struct {
	Engine       string
	Blocks       []int
	ApproxBlocks int
	Precise      bool
}

// debugState reads kvgate's /debug/state: each wire engine's state and
// its part of the index, by engine id (the index names engines by
// address).
func debugState(t *testing.T, admin string) (map[string]string, map[string]indexEngine) {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Engines []struct {
			ID, Addr, State string
		} `json:"engines"`
		Index struct {
			Engines []indexEngine `json:"engines"`
		} `json:"index"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	states, index, ids := map[string]string{}, map[string]indexEngine{}, map[string]string{}
	for _, e := range st.Engines {
		states[e.ID], ids[e.Addr] = e.State, e.ID
	}
	for _, e := range st.Index.Engines {
		index[ids[e.Engine]] = e
	}
	return states, index
}

// reportedRunning is the requests running in engine id's last LOAD report,
// as kvgate's /debug/state shows it.
func reportedRunning(t *testing.T, admin, id string) int {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Engines []struct {
			ID           string                 `json:"id"`
			ReportedLoad *struct{ Running int } `json:"reported_load"`
		} `json:"engines"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Engines {
		if e.ID == id && e.ReportedLoad != nil {
			return e.ReportedLoad.Running
		}
	}
	return 0
}

// TestLlamaCppPrefixSticks: a repeated long prefix goes to the llama.cpp
// server that holds it, as llama.cpp's own cache counters show, under the
// default kv policy: through the bridges, whose /slots-derived KV events
// are what kvgate's index holds of them (precise entries, no guesses); and
// with kvgate --http-engine straight to the servers, which send no events
// and are routed on approximate entries, where requests with new prefixes
// also spread over both servers.
func TestLlamaCppPrefixSticks(t *testing.T) {
	t.Run("bridge-events", func(t *testing.T) {
		nodes, base := startLlamaFleet(t)
		held := stickScenario(t, nodes, base, "bridged", func(r *http.Response) *llamaNode {
			return nodeOf(t, nodes, r.Header.Get("x-kvgate-engine"))
		})
		_, index := debugState(t, adminOf(t, base))
		for nd, prefixes := range held {
			// A server holds two prefixes in its two slots; one more
			// pushes one out to llama.cpp's host-memory cache, which the
			// bridge does not index.
			e := index[nd.id]
			if !e.Precise || e.ApproxBlocks != 0 || len(e.Blocks) == 0 || e.Blocks[0] < min(prefixes, 2)*2500/16 {
				t.Errorf("%s holds %d prefixes of 2,500 tokens; kvgate's index of it: %+v, want precise blocks from its events", nd.id, prefixes, e)
			}
		}
	})
	t.Run("http-engine", func(t *testing.T) {
		nodes := startLlamaServers(t, 2)
		_, base := startKvgate(t, "--http-engine", nodes[0].srv.URL+","+nodes[1].srv.URL)
		waitReady(t, base)
		serverOf := httpServerOf(t, nodes)
		// Sequential requests with new prefixes go to both servers, not
		// all to the first: near-ties are broken at random.
		count := map[*llamaNode]int{}
		const n = 20
		for i := range n {
			resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "max_tokens": 1, "temperature": 0,
				"prompt": fmt.Sprintf("New prefix %d: %s", i, strings.Repeat("a fresh question about something else ", 8))})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			count[serverOf(resp)]++
		}
		// Binomial(20, 1/2): fewer than 2 on either is a chance of 4 in 10,000.
		if count[nodes[0]] < 2 || count[nodes[1]] < 2 {
			t.Fatalf("%d requests with new prefixes: %d to the first server, %d to the second", n, count[nodes[0]], count[nodes[1]])
		}
		stickScenario(t, nodes, base, "direct", serverOf)
	})
}

// httpServerOf tells which llama-server answered a request kvgate passed
// through: the one whose llama.cpp counted the tokens it predicted (the
// answer is llama.cpp's own, with no header of kvgate's). Requests must
// be sequential.
func httpServerOf(t *testing.T, nodes []*llamaNode) func(*http.Response) *llamaNode {
	last := map[*llamaNode]float64{}
	read := func() map[*llamaNode]float64 {
		m := map[*llamaNode]float64{}
		for _, nd := range nodes {
			m[nd] = llamaCounters(t, nd.srv.URL)["tokens_predicted_total"]
		}
		return m
	}
	last = read()
	return func(*http.Response) *llamaNode {
		t.Helper()
		var got *llamaNode
		checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			now := read()
			var grew []*llamaNode
			for _, nd := range nodes {
				if now[nd] > last[nd] {
					grew = append(grew, nd)
				}
			}
			if len(grew) != 1 {
				return fmt.Errorf("llama.cpp's tokens_predicted_total grew on %d servers after one request", len(grew))
			}
			got, last = grew[0], now
			return nil
		})
		return got
	}
}

// streamUntil posts body to url and returns the response once the stream
// has sent k data lines, with what it read so far and a reader of the rest.
// The whole stream must end within two minutes.
func streamUntil(t *testing.T, url string, body map[string]any, k int) (*http.Response, *bufio.Reader, []string) {
	t.Helper()
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		rest, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, rest)
	}
	r := bufio.NewReader(resp.Body)
	var lines []string
	for n := 0; n < k; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %q: %v", lines, err)
		}
		lines = append(lines, strings.TrimRight(line, "\n"))
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	return resp, r, lines
}

// rest reads a stream to its end (within the client's patience) into lines.
func rest(t *testing.T, r *bufio.Reader, lines []string) []string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the rest of the stream: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestLlamaCppServerKilledMidStream: of two llama-servers behind bridges,
// the one serving an OpenAI and an Anthropic stream is killed (SIGKILL)
// while both stream. Each stream ends with its API's error event (OpenAI:
// an error data event, then [DONE]; Anthropic: event: error), the next
// requests go to the survivor and succeed, and the dead engine's entries
// leave kvgate's index. (That the dead engine is marked down, whatever
// its last load, is TestLlamaCppDeadServerIsDown's.)
func TestLlamaCppServerKilledMidStream(t *testing.T) {
	nodes, base := startLlamaFleet(t)
	admin := adminOf(t, base)
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	// A long system prompt puts both streams on one engine (the one that
	// took it first), which is what TestLlamaCppPrefixSticks checks.
	system, _ := longPrefix(tok, "killed", 2000)
	msgs := func(q string) []any { return []any{map[string]any{"role": "user", "content": q}} }
	resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": model, "max_tokens": 1,
		"messages": append([]any{map[string]any{"role": "system", "content": system}}, msgs("warm up")...)})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	victim := nodeOf(t, nodes, resp.Header.Get("x-kvgate-engine"))
	survivor := nodes[0]
	if survivor == victim {
		survivor = nodes[1]
	}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, index := debugState(t, admin); index[victim.id].Blocks == nil || index[victim.id].Blocks[0] == 0 {
			return fmt.Errorf("no block of %s in kvgate's index: %+v", victim.id, index[victim.id])
		}
		return nil
	})

	// Long answers (ignore_eos; the Messages API has none, and perf/gguf's
	// default model never generates its end token).
	oResp, oRest, oLines := streamUntil(t, base+"/v1/chat/completions", map[string]any{"model": model, "max_tokens": 2000,
		"ignore_eos": true, "stream": true, "messages": append([]any{map[string]any{"role": "system", "content": system}}, msgs("a long answer")...)}, 3)
	aResp, aRest, aLines := streamUntil(t, base+"/v1/messages", map[string]any{"model": model, "max_tokens": 2000, "stream": true,
		"system": system, "messages": msgs("another long answer")}, 3)
	for _, r := range []*http.Response{oResp, aResp} {
		if got := r.Header.Get("x-kvgate-engine"); got != victim.id {
			t.Fatalf("a stream with the warmed system prompt went to %s, the prompt is on %s", got, victim.id)
		}
	}
	// The kill comes once the bridge's LOAD report has shown both streams
	// running: a bridge whose server died keeps its last report, and one
	// of an idle server would draw the next requests to the dead engine
	// (the bug TestLlamaCppDeadServerIsDown records).
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := reportedRunning(t, admin, victim.id); n < 2 {
			return fmt.Errorf("%s reports %d requests running, want the two streams", victim.id, n)
		}
		return nil
	})
	if err := victim.srv.Kill(); err != nil {
		t.Logf("kill: %v", err)
	}

	oLines = rest(t, oRest, oLines)
	var data []string
	for _, l := range oLines {
		if strings.HasPrefix(l, "data: ") {
			data = append(data, strings.TrimPrefix(l, "data: "))
		}
	}
	if n := len(data); n < 3 || data[n-1] != "[DONE]" || !json.Valid([]byte(data[n-2])) || !strings.Contains(data[n-2], `"error"`) {
		t.Errorf("OpenAI stream after the kill ends %q, want an error event and [DONE]", data[max(0, n-3):])
	}
	aLines = rest(t, aRest, aLines)
	if n := len(aLines); n < 2 || aLines[n-2] != "event: error" || !strings.HasPrefix(aLines[n-1], "data: ") ||
		!json.Valid([]byte(strings.TrimPrefix(aLines[n-1], "data: "))) || !strings.Contains(aLines[n-1], `"type":"error"`) {
		t.Errorf("Anthropic stream after the kill ends %q, want event: error with its data", aLines[max(0, n-4):])
	}

	// The dead engine's entries leave the index.
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		_, index := debugState(t, admin)
		if e := index[victim.id]; slices.ContainsFunc(e.Blocks, func(b int) bool { return b > 0 }) || e.ApproxBlocks > 0 {
			return fmt.Errorf("the dead engine %s still has entries in kvgate's index: %+v", victim.id, e)
		}
		return nil
	})

	// The next requests, the warmed prompt among them, go to the survivor.
	for i := range 6 {
		q := fmt.Sprintf("after the kill %d", i)
		if i%2 == 0 {
			q = system + q
		}
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "max_tokens": 2, "prompt": q})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("x-kvgate-engine") != survivor.id {
			t.Fatalf("request %d after the kill: %d from %q, want 200 from the survivor %s: %s", i, resp.StatusCode,
				resp.Header.Get("x-kvgate-engine"), survivor.id, body)
		}
	}
}

// killIdleServer starts a fleet, has both engines answer, waits for the
// victim's LOAD to say it is idle, and SIGKILLs its llama-server, leaving
// its bridge up.
func killIdleServer(t *testing.T) (base, admin string, victim, survivor *llamaNode) {
	t.Helper()
	nodes, base := startLlamaFleet(t)
	admin = adminOf(t, base)
	victim, survivor = nodes[1], nodes[0]
	// Both engines answer first, so each has sent a LOAD report of an
	// idle server and KV events.
	seen, i := map[string]bool{}, 0
	checkFor(t, 2*time.Minute, time.Millisecond, func() error {
		i++
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "max_tokens": 1,
			"prompt": fmt.Sprintf("Warm-up %d: %s", i, strings.Repeat("a question of its own ", 8))})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if seen[resp.Header.Get("x-kvgate-engine")] = true; len(seen) < 2 {
			return fmt.Errorf("only %v served", seen)
		}
		return nil
	})
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := reportedRunning(t, admin, victim.id); n != 0 {
			return fmt.Errorf("%s reports %d requests running, want an idle server", victim.id, n)
		}
		return nil
	})
	if err := victim.srv.Kill(); err != nil {
		t.Logf("kill: %v", err)
	}
	return base, admin, victim, survivor
}

// TestLlamaCppDeadServerRerouted: requests routed to a bridge whose
// llama-server died get OVERLOADED from it, and kvgate serves them on the
// survivor before the client sees anything.
func TestLlamaCppDeadServerRerouted(t *testing.T) {
	base, _, _, survivor := killIdleServer(t)
	for i := range 10 {
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "max_tokens": 2,
			"prompt": fmt.Sprintf("New prefix %d after the kill: %s", i, strings.Repeat("a fresh question ", 8))})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("x-kvgate-engine") != survivor.id {
			t.Fatalf("request %d after the kill: %d from %q, want 200 from the survivor %s: %s", i, resp.StatusCode,
				resp.Header.Get("x-kvgate-engine"), survivor.id, body)
		}
	}
}

// TestLlamaCppDeadServerIsDown: a bridge whose llama-server died refuses
// its routers (serve.Server.Suspend), so kvgate shows the engine down and
// no longer tries it.
func TestLlamaCppDeadServerIsDown(t *testing.T) {
	_, admin, victim, _ := killIdleServer(t)
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if states, _ := debugState(t, admin); states[victim.id] != "down" {
			return fmt.Errorf("the dead engine %s is %q in /debug/state, want down", victim.id, states[victim.id])
		}
		return nil
	})
}
