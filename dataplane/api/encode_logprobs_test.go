package api

import (
	"strings"
	"testing"
)

// renderLogprobs drives an encoder as the gateway does: each delta's
// tokens' logprobs first, then the delta; the second event's tokens carry
// no text yet (a held-back UTF-8 sequence), so theirs ride on the close.
func renderLogprobs(enc LogprobsEncoder) string {
	b := enc.Open(nil)
	enc.AddLogprobs([]TokenLogprob{{Token: "Hel", Logprob: -0.5, Top: []TopLogprob{{"Hel", -0.5}, {"He", -1.25}}}})
	b = enc.Delta(b, Piece{Text: "Hel"})
	enc.AddLogprobs([]TokenLogprob{{Token: "lo", Logprob: -2, Top: []TopLogprob{{"p", -0.75}, {"lo", -2}}}})
	return string(enc.Close(b, End{Finish: FinishLength, Usage: Usage{Prompt: 3, Completion: 2}}))
}

func TestOpenAIEncoderLogprobs(t *testing.T) {
	const usage = `"usage":{"completion_tokens":2,"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":5}`
	chatHel := `{"content":[{"bytes":[72,101,108],"logprob":-0.5,"token":"Hel","top_logprobs":[{"bytes":[72,101,108],"logprob":-0.5,"token":"Hel"},{"bytes":[72,101],"logprob":-1.25,"token":"He"}]}],"refusal":null}`
	chatLo := `{"content":[{"bytes":[108,111],"logprob":-2,"token":"lo","top_logprobs":[{"bytes":[112],"logprob":-0.75,"token":"p"},{"bytes":[108,111],"logprob":-2,"token":"lo"}]}],"refusal":null}`
	cases := []struct {
		name string
		enc  *OpenAIEncoder
		want []string
	}{
		{"completion", &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Logprobs: true}, []string{
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":{"text_offset":[0,3],"token_logprobs":[-0.5,-2],"tokens":["Hel","lo"],"top_logprobs":[{"He":-1.25,"Hel":-0.5},{"lo":-2,"p":-0.75}]},"text":"Hel"}],"created":5,"id":"c","model":"m","object":"text_completion",` + usage + `}`}},
		{"completion stream", &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Logprobs: true, Stream: true}, []string{
			`{"choices":[{"finish_reason":null,"index":0,"logprobs":{"text_offset":[0],"token_logprobs":[-0.5],"tokens":["Hel"],"top_logprobs":[{"He":-1.25,"Hel":-0.5}]},"text":"Hel"}],"created":5,"id":"c","model":"m","object":"text_completion"}`,
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":{"text_offset":[3],"token_logprobs":[-2],"tokens":["lo"],"top_logprobs":[{"lo":-2,"p":-0.75}]},"text":""}],"created":5,"id":"c","model":"m","object":"text_completion"}`,
			`"[DONE]"`}},
		{"chat", &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Chat: true, Logprobs: true}, []string{
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":{"content":[` + chatHel[12:len(chatHel)-17] + `,` + chatLo[12:len(chatLo)-17] + `],"refusal":null},"message":{"content":"Hel","role":"assistant"}}],"created":5,"id":"c","model":"m","object":"chat.completion",` + usage + `}`}},
		{"chat stream", &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Chat: true, Logprobs: true, Stream: true}, []string{
			`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":5,"id":"c","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"content":"Hel"},"finish_reason":null,"index":0,"logprobs":` + chatHel + `}],"created":5,"id":"c","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{},"finish_reason":"length","index":0,"logprobs":` + chatLo + `}],"created":5,"id":"c","model":"m","object":"chat.completion.chunk"}`,
			`"[DONE]"`}},
		{"not asked", &OpenAIEncoder{ID: "c", Model: "m", Created: 5}, []string{
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"text":"Hel"}],"created":5,"id":"c","model":"m","object":"text_completion",` + usage + `}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := renderLogprobs(c.enc)
			var got []string
			if c.enc.Stream {
				for _, ev := range dataEvents(t, out) {
					got = append(got, jsonOf(t, ev))
				}
			} else {
				got = []string{out}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// A completion's echo comes before the output, streamed as its own first
// chunk.
func TestOpenAIEncoderEcho(t *testing.T) {
	whole := render(&OpenAIEncoder{ID: "c", Model: "m", Echo: "Say: "}, FinishStop)
	if !strings.Contains(whole, `"text":"Say: Hello"`) {
		t.Fatalf("echo missing: %s", whole)
	}
	evs := dataEvents(t, render(&OpenAIEncoder{ID: "c", Model: "m", Echo: "Say: ", Stream: true}, FinishStop))
	if first := jsonOf(t, evs[0]); !strings.Contains(first, `"text":"Say: "`) {
		t.Fatalf("first chunk %s", first)
	}
}

// Choices of a fan-out (n > 1): each encoder streams its own index and
// leaves the stream's end to EndStream; whole ones join in order with the
// usage given.
func TestOpenAIEncoderChoices(t *testing.T) {
	enc := &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Stream: true, IncludeUsage: true, Index: 2, Part: true}
	out := render(enc, FinishStop)
	if strings.Contains(out, "[DONE]") || strings.Contains(out, `"usage"`) || strings.Contains(out, `"index":0`) ||
		!strings.Contains(out, `"index":2`) {
		t.Fatalf("part stream: %s", out)
	}
	end := string(enc.EndStream(nil, Usage{Prompt: 3, Completion: 8}))
	if !strings.Contains(end, `"completion_tokens":8`) || !strings.HasSuffix(end, "data: [DONE]\n\n") {
		t.Fatalf("end: %s", end)
	}
	var bodies [][]byte
	for i := range 2 {
		bodies = append(bodies, []byte(render(&OpenAIEncoder{ID: "c", Model: "m", Created: 5, Index: i, Part: true}, FinishLength)))
	}
	joined, err := JoinChoices(bodies, Usage{Prompt: 10, Completion: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"text":"Hello"},{"finish_reason":"length","index":1,"logprobs":null,"text":"Hello"}],"created":5,"id":"c","model":"m","object":"text_completion","usage":{"completion_tokens":4,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":14}}`
	if string(joined) != want {
		t.Fatalf("joined\n%s\nwant\n%s", joined, want)
	}
}
