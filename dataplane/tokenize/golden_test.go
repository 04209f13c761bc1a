package tokenize

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

func builtin(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type corpusItem struct {
	Name string  `json:"name"`
	Text *string `json:"text"`
	Hex  *string `json:"hex"`
}

func (c corpusItem) input(t testing.TB) string {
	if c.Hex != nil {
		b, err := hex.DecodeString(*c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return *c.Text
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestQwen3Golden compares with ids produced by the Hugging Face JavaScript
// tokenizers (testdata/gen/gen.mjs) on a varied corpus.
func TestQwen3Golden(t *testing.T) {
	tok := builtin(t)
	var corpus []corpusItem
	var golden []struct {
		Name string   `json:"name"`
		IDs  []uint32 `json:"ids"`
	}
	readJSON(t, "testdata/corpus.json", &corpus)
	readJSON(t, "testdata/qwen3_ids.json", &golden)
	if len(corpus) != len(golden) {
		t.Fatalf("corpus has %d items, golden %d: rerun testdata/gen", len(corpus), len(golden))
	}
	for i, c := range corpus {
		t.Run(c.Name, func(t *testing.T) {
			want := golden[i].IDs
			got := tok.Encode(nil, c.input(t), false)
			if !slices.Equal(got, want) {
				t.Fatalf("ids differ\n got %v\nwant %v", got, want)
			}
			// Again, now from the caches.
			if again := tok.Encode(nil, c.input(t), false); !slices.Equal(again, want) {
				t.Fatalf("cached ids differ")
			}
		})
	}
}

// TestChatGolden renders chat templates as @huggingface/jinja does and
// tokenizes the result identically.
func TestChatGolden(t *testing.T) {
	tok := builtin(t)
	var cases []map[string]json.RawMessage
	var golden []struct {
		Name string   `json:"name"`
		Text string   `json:"text"`
		IDs  []uint32 `json:"ids"`
	}
	readJSON(t, "testdata/chat_cases.json", &cases)
	readJSON(t, "testdata/chat_golden.json", &golden)
	for i, c := range cases {
		t.Run(golden[i].Name, func(t *testing.T) {
			in := chatInputOf(t, c)
			ids, text, err := tok.EncodeChat(nil, in)
			if err != nil {
				t.Fatal(err)
			}
			if text != golden[i].Text {
				t.Fatalf("rendering differs\n got %q\nwant %q", text, golden[i].Text)
			}
			if !slices.Equal(ids, golden[i].IDs) {
				t.Fatalf("ids differ\n got %v\nwant %v", ids, golden[i].IDs)
			}
		})
	}
}

func chatInputOf(t testing.TB, c map[string]json.RawMessage) *ChatInput {
	in := &ChatInput{Messages: c["messages"], Tools: c["tools"], Extra: map[string]json.RawMessage{}}
	if raw, ok := c["add_generation_prompt"]; ok {
		if err := json.Unmarshal(raw, &in.AddGenerationPrompt); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range c {
		switch k {
		case "name", "messages", "tools", "add_generation_prompt":
		default:
			in.Extra[k] = v
		}
	}
	return in
}
