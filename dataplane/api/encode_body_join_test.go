package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"
)

// refJoinChoices is how JoinChoices joined bodies before it cut them:
// each decoded into a map, the choices gathered, the first map given
// them and the usage, and encoded again. It stays here as the reference.
func refJoinChoices(bodies [][]byte, u Usage) ([]byte, error) {
	var out map[string]any
	var choices []any
	for i, b := range bodies {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		if i == 0 {
			out = m
		}
		cs, _ := m["choices"].([]any)
		choices = append(choices, cs...)
	}
	if out == nil {
		return nil, json.Unmarshal(nil, &out)
	}
	out["choices"], out["usage"] = choices, openAIUsage(u)
	return json.Marshal(out)
}

// choiceBodies is the bodies of c's encoder as n choices (Index i, Part).
func choiceBodies(c bodyCase, n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		c.enc.Index, c.enc.Part = i, true
		bodies[i] = c.feed().Close(nil, c.end)
	}
	return bodies
}

// sameAsRef compares a join with the reference's. The reference decoded
// and encoded the bodies again, so where a body escaped an invalid byte
// as \ufffd it wrote U+FFFD's own bytes; the join keeps each choice's
// bytes. That is the one difference allowed.
func sameAsRef(t *testing.T, name string, bodies [][]byte, u Usage) {
	t.Helper()
	want, err := refJoinChoices(bodies, u)
	if err != nil {
		t.Fatalf("%s: reference: %v", name, err)
	}
	got, err := JoinChoices(bodies, u)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !json.Valid(got) {
		t.Fatalf("%s: not JSON: %s", name, got)
	}
	if norm := bytes.ReplaceAll(got, []byte(`\ufffd`), []byte("\uFFFD")); !bytes.Equal(norm, want) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
	if !bytes.Contains(bytes.Join(bodies, nil), []byte(`\ufffd`)) && !bytes.Equal(got, want) {
		t.Errorf("%s: not byte for byte:\n got %s\nwant %s", name, got, want)
	}
}

// TestJoinChoicesIsMarshal: every whole-body case as 1, 2 and 3 choices,
// and choices of different cases joined, against the reference.
func TestJoinChoicesIsMarshal(t *testing.T) {
	cases := bodyCases()
	u := Usage{Prompt: 12, Completion: 7, Cached: 4}
	for _, c := range cases {
		for n := 1; n <= 3; n++ {
			sameAsRef(t, fmt.Sprintf("%s x%d", c.name, n), choiceBodies(c, n), u)
		}
	}
	for i := 1; i < len(cases); i++ {
		a, b := cases[i-1], cases[i]
		if a.enc.Chat != b.enc.Chat {
			continue
		}
		bodies := [][]byte{choiceBodies(a, 1)[0], choiceBodies(b, 2)[1]}
		sameAsRef(t, a.name+" + "+b.name, bodies, Usage{Prompt: 1<<32 - 1, Completion: 9})
	}
}

// TestJoinChoicesRefuses: no bodies, or one that is not a whole
// response as appendBody writes it, is an error.
func TestJoinChoicesRefuses(t *testing.T) {
	good := choiceBodies(bodyCases()[0], 1)[0]
	for _, bodies := range [][][]byte{nil, {nil}, {good, []byte(`{}`)}, {[]byte(`{"choices":[]}`)},
		{[]byte(`{"choices":[{}],"usage":{},"created":1}`)}} {
		if _, err := JoinChoices(bodies, Usage{}); !errors.Is(err, ErrNotWholeBody) {
			t.Errorf("%q: %v", bodies, err)
		}
	}
}

func FuzzJoinChoices(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, s, s, false)
	}
	f.Fuzz(func(t *testing.T, id, text, reasoning, args string, chat bool) {
		c := bodyCase{enc: OpenAIEncoder{ID: id, Model: reasoning, Chat: chat, Logprobs: len(text)%2 == 0},
			pieces: []Piece{{Kind: PieceReasoning, Text: reasoning}, {Text: text}, {Kind: PieceToolCall, Name: id, Text: args}},
			lps:    []TokenLogprob{{Token: text, Top: []TopLogprob{{args, -1}, {id, -2}}}}, end: End{StopSequence: args}}
		bodies := choiceBodies(c, 2)
		if utf8.ValidString(id) && utf8.ValidString(text) && utf8.ValidString(reasoning) && utf8.ValidString(args) {
			sameAsRef(t, "", bodies, Usage{Prompt: 3, Completion: 5})
			return
		}
		// With invalid UTF-8 the reference's keys may sort otherwise
		// (or two become one) once their bytes are U+FFFD: hold the join
		// to each choice's own bytes.
		got, err := JoinChoices(bodies, Usage{})
		choice, _, _ := cutBody(bodies[1])
		if err != nil || !json.Valid(got) || !bytes.Contains(got, choice) {
			t.Fatalf("%v: %s", err, got)
		}
	})
}

// TestJoinChoicesAllocs: a join appended into a reused buffer allocates
// nothing.
func TestJoinChoicesAllocs(t *testing.T) {
	bodies := choiceBodies(bodyCases()[0], 3)
	buf, _ := AppendJoinChoices(nil, bodies, Usage{})
	if n := testing.AllocsPerRun(100, func() { buf, _ = AppendJoinChoices(buf[:0], bodies, Usage{}) }); n != 0 {
		t.Errorf("%v allocations per join", n)
	}
}

// BenchmarkJoinChoices compares the cut (hand) with the decode and
// encode it replaced (marshal), for n = 2 one-token chat answers.
func BenchmarkJoinChoices(b *testing.B) {
	c := bodyCase{enc: OpenAIEncoder{ID: "chatcmpl-0123456789", Model: "Qwen/Qwen3-8B", Created: 1700000000, Chat: true},
		pieces: []Piece{{Text: "Hi"}}, end: End{Usage: Usage{Prompt: 20, Completion: 1, Cached: 16}}}
	bodies := choiceBodies(c, 2)
	u := Usage{Prompt: 20, Completion: 2, Cached: 16}
	b.Run("hand", func(b *testing.B) {
		buf, _ := AppendJoinChoices(nil, bodies, u)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = AppendJoinChoices(buf[:0], bodies, u)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = refJoinChoices(bodies, u)
		}
	})
}
