package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// chatLogprobs is what a whole chat response's choice says of logprobs.
type chatLogprobs struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Logprobs *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				Bytes       []int   `json:"bytes"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// The simulated engines (FeatureSampling) answer logprobs: one entry per
// output token, each with the alternatives asked for, the sampled token
// the best of them, and the same again for the same seed.
func TestChatLogprobs(t *testing.T) {
	base := startGateway(t, nil)
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":6,"seed":5,"logprobs":true,"top_logprobs":3}`
	var first string
	for i := range 2 {
		resp, b := post(t, base+"/v1/chat/completions", "", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		var r chatLogprobs
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatal(err)
		}
		lp := r.Choices[0].Logprobs
		if lp == nil || len(lp.Content) != 6 || r.Usage.CompletionTokens != 6 {
			t.Fatalf("logprobs of %d tokens: %s", r.Usage.CompletionTokens, b)
		}
		for _, c := range lp.Content {
			if len(c.TopLogprobs) != 3 || c.TopLogprobs[0].Token != c.Token || c.Logprob >= 0 || string(bytesOf(c.Bytes)) != c.Token ||
				!(c.TopLogprobs[1].Logprob < c.TopLogprobs[0].Logprob) {
				t.Fatalf("entry %+v", c)
			}
		}
		lpJSON, _ := json.Marshal(lp)
		if i == 0 {
			first = string(lpJSON)
		} else if got := string(lpJSON); got != first {
			t.Fatalf("same seed, other logprobs:\n%s\n%s", got, first)
		}
	}
}

func bytesOf(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// A streamed completion's chunks carry the logprobs of their tokens: as
// many in all as tokens generated, with text offsets counting the text.
func TestCompletionLogprobsStream(t *testing.T) {
	base := startGateway(t, nil)
	resp, b := post(t, base+"/v1/completions", "",
		`{"model":"`+model+`","prompt":"Say","max_tokens":5,"logprobs":2,"stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var tokens, offsets []any
	for _, ev := range strings.Split(b, "\n\n") {
		d, ok := strings.CutPrefix(ev, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Logprobs struct {
					Tokens     []any            `json:"tokens"`
					TextOffset []any            `json:"text_offset"`
					Top        []map[string]any `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("%q: %v", d, err)
		}
		lp := c.Choices[0].Logprobs
		for _, top := range lp.Top {
			if len(top) < 2 || len(top) > 3 { // the 2 asked for, and the sampled token if not among them
				t.Fatalf("top_logprobs %v", top)
			}
		}
		tokens, offsets = append(tokens, lp.Tokens...), append(offsets, lp.TextOffset...)
	}
	if len(tokens) != 5 || len(offsets) != 5 || offsets[0] != float64(0) {
		t.Fatalf("tokens %v offsets %v", tokens, offsets)
	}
}

// logit_bias and echo change the answer: a token biased +100 is every
// output token, and echo puts the prompt first.
func TestLogitBiasAndEcho(t *testing.T) {
	base := startGateway(t, nil)
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	id := tok.Encode(nil, " hello", false)[0]
	resp, b := post(t, base+"/v1/completions", "",
		`{"model":"`+model+`","prompt":"Say","max_tokens":4,"echo":true,"logit_bias":{"`+itoa(id)+`":100}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var r struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	_ = json.Unmarshal([]byte(b), &r)
	want := "Say" + strings.Repeat(tok.DecodeString([]uint32{id}, false), 4)
	if len(r.Choices) != 1 || r.Choices[0].Text != want {
		t.Fatalf("text %q, want %q", b, want)
	}
	if resp, b := post(t, base+"/v1/completions", "", `{"model":"`+model+`","prompt":"Say","logit_bias":{"999999999":1}}`); resp.StatusCode != 400 ||
		!strings.Contains(b, `"param":"logit_bias"`) {
		t.Fatalf("a bias outside the vocabulary: %d %s", resp.StatusCode, b)
	}
}

func itoa(v uint32) string { b, _ := json.Marshal(v); return string(b) }

// Engines without FeatureSampling are never sent the section: a request
// that needs it finds no engine and is a 400 naming its field in the
// API's shape; one that needs none is served as before.
func TestSamplingNeedsFeature(t *testing.T) {
	base := startGatewayWith(t, gwOptions{noSampling: true}).base
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"logprobs":true}`, "logprobs"},
		{"/v1/completions", `{"model":"` + model + `","prompt":"hi","presence_penalty":1}`, "presence_penalty"},
		{"/v1/completions", `{"model":"` + model + `","prompt":"hi","min_tokens":2}`, "min_tokens"},
		{"/v1/completions", `{"model":"` + model + `","prompt":"hi","n":3,"stream":true,"logprobs":1}`, "logprobs"}, // every choice fails
		{"/v1/completions", `{"model":"` + model + `","prompt":"hi","logit_bias":{"5":-1}}`, "logit_bias"},
	} {
		resp, b := post(t, base+c.path, "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(b, `"param":"`+c.field+`"`) {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
	if resp, b := post(t, base+"/v1/completions", "", `{"model":"`+model+`","prompt":"hi","max_tokens":2,"presence_penalty":0,"echo":true}`); resp.StatusCode != 200 {
		t.Fatalf("a request without extras: %d %s", resp.StatusCode, b)
	}
}

// Anthropic has no logprobs: the field is refused by name, in its shape.
func TestMessagesRefuseLogprobs(t *testing.T) {
	base := startGateway(t, nil)
	resp, b := post(t, base+"/v1/messages", "",
		`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"logprobs":true}`)
	if resp.StatusCode != 400 || !strings.Contains(b, `"type":"invalid_request_error"`) || !strings.Contains(b, "logprobs") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// Only a request with extras sets GENERATE's SAMPLING flag (so an engine
// from before the section, which routing never sends one to, gets the
// version-1 GENERATE it decodes), and min_tokens is held to max_tokens.
func TestGenerateSamplingFlag(t *testing.T) {
	plain := &genRequest{Request: &api.Request{Model: model, MaxTokens: 4, TopP: 1}, id: "r", tokens: []uint32{1}}
	if g := plain.generate(); g.Flags&wire.GenSampling != 0 || plain.needsSampling() {
		t.Fatalf("a request without extras: flags %#x", g.Flags)
	}
	x := api.Extras{MinTokens: 9, Logprobs: true, TopLogprobs: 2, BiasTokens: []uint32{5}, Bias: []float32{-1}, Field: "min_tokens"}
	req := &genRequest{Request: &api.Request{Model: model, MaxTokens: 4, TopP: 1, Extras: x}, id: "r", tokens: []uint32{1}}
	g := req.generate()
	s := g.Sampling
	if g.Flags&wire.GenSampling == 0 || s.MinTokens != 4 || s.RepetitionPenalty != 1 || !s.Logprobs() || s.TopLogprobs != 2 ||
		s.LogitBias.Len() != 1 {
		t.Fatalf("flags %#x sampling %+v", g.Flags, s)
	}
	if _, err := g.AppendPayload(nil); err != nil {
		t.Fatal(err)
	}
}

// min_tokens holds stop strings off too, as vLLM's stop checker does: a
// stop string every token matches ends the output only once min_tokens
// tokens are out.
func TestMinTokensHoldsStopStrings(t *testing.T) {
	base := startGateway(t, nil)
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	id := tok.Encode(nil, " hello", false)[0]
	word := tok.DecodeString([]uint32{id}, false)
	before := strings.TrimSuffix(word, "hello") // what precedes the stop string in a token
	for _, c := range []struct {
		min  int
		text string
		n    float64
	}{{0, before, 1}, {3, strings.Repeat(word, 3) + before, 4}} {
		resp, b := post(t, base+"/v1/completions", "", `{"model":"`+model+`","prompt":"Say","max_tokens":6,"stop":["hello"],"min_tokens":`+
			itoa(uint32(c.min))+`,"logit_bias":{"`+itoa(id)+`":100}}`)
		var r struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(b), &r); err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		// The tokens counted are those received, a frame's worth past the stop.
		if n, _ := r.Usage["completion_tokens"].(float64); r.Choices[0].Text != c.text || n < c.n {
			t.Fatalf("min_tokens %d: text %q, usage %v; want %q, %v tokens", c.min, r.Choices[0].Text, r.Usage, c.text, c.n)
		}
	}
}
