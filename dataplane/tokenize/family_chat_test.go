package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFamilyChatGolden renders the chat templates of Llama 2, Mistral
// v0.1 and v0.3 (with tools), Gemma 2 and 3, gpt-oss (harmony, with tools
// and builtin tools) and DeepSeek V3 (tool calls and outputs) as
// @huggingface/jinja does (testdata/family_chat_cases.json), refuses what
// they refuse (raise_exception), and tokenizes the result as Hugging Face
// does. strftime_now reads the generator's fixed time.
func TestFamilyChatGolden(t *testing.T) {
	var cases []map[string]json.RawMessage
	readJSON(t, "testdata/family_chat_cases.json", &cases)
	for _, name := range []string{"llama2", "gemma3", "gptoss", "deepseek_v3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", name))
		if err != nil {
			t.Fatal(err)
		}
		if ct := tok.Chat(); ct != nil {
			ct.clock = chatGoldenClock
		}
		var g familyGolden
		readJSON(t, filepath.Join("testdata", "families", name, "golden.json"), &g)
		i := 0
		for _, c := range cases {
			var family, tmpl string
			_ = json.Unmarshal(c["family"], &family)
			_ = json.Unmarshal(c["template"], &tmpl)
			if family != name {
				continue
			}
			if i >= len(g.Chat) {
				t.Fatalf("%s: more chat cases than golden.json has: rerun testdata/gen", name)
			}
			want := g.Chat[i]
			i++
			t.Run(want.Name, func(t *testing.T) {
				for _, k := range []string{"family", "source", "template"} {
					delete(c, k)
				}
				ct := tok.Chat()
				if tmpl != "config" {
					if ct, err = NewChatTemplate(tmpl, tok.Config.BOS, tok.Config.EOS); err != nil {
						t.Fatal(err)
					}
				}
				text, err := ct.Render(chatInputOf(t, c))
				if want.Text == nil {
					if err == nil || !strings.Contains(err.Error(), want.Error) {
						t.Fatalf("rendered %q, want the error %q", text, want.Error)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if text != *want.Text {
					t.Fatalf("rendering differs\n got %q\nwant %q", text, *want.Text)
				}
				if ids := tok.Encode(nil, text, false); !slices.Equal(ids, want.IDs) {
					t.Fatalf("ids differ\n got %v\nwant %v", ids, want.IDs)
				}
			})
		}
		if i != len(g.Chat) {
			t.Fatalf("%s: %d chat cases, %d in golden.json: rerun testdata/gen", name, i, len(g.Chat))
		}
	}
}

// chatGoldenClock is the time gen_families.mjs renders at.
func chatGoldenClock() time.Time { return time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC) }

// TestChatTemplateFile: chat_template.jinja beside tokenizer_config.json
// is the chat template, over the config's own.
func TestChatTemplateFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "families", "llama2")
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "tokenizer_config.json" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["chat_template"] = "from the config"
			b, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := &ChatInput{Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)}
	if got, _ := tok.Chat().Render(in); got != "from the config" {
		t.Fatalf("config template: %q", got)
	}
	jinja := "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"
	if err := os.WriteFile(filepath.Join(dir, ChatTemplateFile), []byte(jinja), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err = LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := tok.Chat().Render(in); got != "<s>[user] hi" {
		t.Fatalf("chat_template.jinja: %q", got)
	}
}
