//go:build e2e

package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// llamaCorpus is the tokenizer's own golden corpus plus what a router
// meets in prompts and the corpus lacks.
func llamaCorpus(t *testing.T) []struct{ name, text string } {
	t.Helper()
	b, err := os.ReadFile("../../dataplane/tokenize/testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var items []struct {
		Name string  `json:"name"`
		Text *string `json:"text"`
		Hex  *string `json:"hex"`
	}
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatal(err)
	}
	var out []struct{ name, text string }
	for _, it := range items {
		text := ""
		switch {
		case it.Text != nil:
			text = *it.Text
		case it.Hex != nil:
			raw, err := hex.DecodeString(*it.Hex)
			if err != nil {
				t.Fatal(err)
			}
			text = string(raw)
		}
		out = append(out, struct{ name, text string }{it.Name, text})
	}
	for _, c := range [][2]string{
		{"special_inside_words", "say<|im_start|>hi<|im_end|>there<|endoftext|>end"},
		{"special_with_spaces", "  <|im_start|>  user \n<|im_end|>\n\n"},
		{"chat_turns", "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n写一个 Go 函数<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"added_not_special", "<tool_call>{\"name\":\"f\"}</tool_call> and <think>x</think>"},
		{"rust_code", "fn main() {\n    let v: Vec<u64> = (1..=10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n"},
		{"numbers_long", "0 00 000 1234567890 3.14159 -42 1e-9 0x1F 1,234,567.89 ١٢٣"},
		{"cjk_mixed", "東京タワー333m、서울 N타워 236m；上海中心大厦632米。"},
		{"emoji_zwj_skin", "👩🏽‍💻👨‍👩‍👧‍👦🫠🏴‍☠️ ok👍"},
		{"whitespace_mix", "a\u00a0b\u2003c\u3000d \t\n\r\n  \v\f e"},
		{"decomposed_accents", "Cafe\u0301 nai\u0308ve A\u030angstro\u0308m"},
		{"lone_surrogate_replaced", "x\ufffdy\ufffd"},
		{"eos_like_text", "html</s>tag and </s> end, <s>x</s>"},
	} {
		out = append(out, struct{ name, text string }{c[0], c[1]})
	}
	return out
}

// knownTokenizerDifferences are the corpus cases where llama.cpp and kvgate
// tokenize differently, each with why. The test fails on any other
// difference, and on a listed one that has gone, so the list stays true.
var knownTokenizerDifferences = map[string]string{
	// llama.cpp's byte-level BPE applies no normalizer; Qwen3's
	// tokenizer.json NFC-normalizes first, so decomposed accents and
	// Hangul jamo tokenize differently. Text in NFC (nearly all text) is
	// unaffected.
	"nfc_combining":      "no NFC normalization in llama.cpp",
	"decomposed_accents": "no NFC normalization in llama.cpp",
	// llama.cpp (src/llama-vocab.cpp, its end-of-generation detection by
	// spelling) turns any vocabulary token spelled "</s>" into a CONTROL
	// end-of-generation token, so with parse_special it matches "</s>"
	// whole (Qwen3's id 128247) where Hugging Face's BPE splits it into
	// "</", "s", ">". Qwen3 GGUFs converted by llama.cpp itself do the same.
	"eos_like_text": `llama.cpp makes the vocabulary token "</s>" a control token`,
}

// TestLlamaCppTokenizesAsKvgate checks llama-server's /tokenize, serving a
// perf/gguf model built from the built-in Qwen3 tokenizer, against kvgate's
// tokenizer: added tokens parsed in text (parse_special, as kvgate always
// does), nothing added around it (add_special false).
func TestLlamaCppTokenizesAsKvgate(t *testing.T) {
	srv := llamacpptest.Start(t, llamacpp.Config{})
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range llamaCorpus(t) {
		text := c.text
		if !utf8.ValidString(text) {
			// JSON carries only valid UTF-8: kvgate's API decoder, like
			// any client's encoder, replaces the invalid bytes. Say what
			// llama.cpp does with the raw bytes, then compare on the text
			// kvgate itself tokenizes (its ids decoded).
			body := append(append([]byte(`{"content":"`), text...), `","add_special":false}`...)
			resp, err := http.Post(srv.URL+"/tokenize", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			t.Logf("%s: llama-server answers %d to raw invalid UTF-8 in JSON", c.name, resp.StatusCode)
			text = tok.DecodeString(tok.Encode(nil, text, false), false)
		}
		want := tok.Encode(nil, text, false)
		got := llamaTokenize(t, srv.URL, text)
		reason, known := knownTokenizerDifferences[c.name]
		switch {
		case slices.Equal(got, want) && known:
			t.Errorf("%s: now tokenizes as kvgate; drop it from knownTokenizerDifferences (%s)", c.name, reason)
		case slices.Equal(got, want):
		case known:
			t.Logf("%s: known difference (%s)\n%s", c.name, reason, tokenDiff(tok, want, got))
		default:
			t.Errorf("%s: %q tokenizes differently\n%s", c.name, text, tokenDiff(tok, want, got))
		}
	}
	// A lone surrogate escape is the one invalid text JSON can spell.
	resp, body := post(t, srv.URL+"/tokenize", json.RawMessage(`{"content":"x\ud800y","add_special":false}`))
	t.Logf("lone surrogate escape: llama-server answers %d %.120s", resp.StatusCode, body)
}

// llamaTokenize asks llama-server for text's ids as kvgate would count them.
func llamaTokenize(t *testing.T, base, text string) []uint32 {
	t.Helper()
	resp, body := post(t, base+"/tokenize", map[string]any{"content": text, "add_special": false, "parse_special": true})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/tokenize %d: %s", resp.StatusCode, body)
	}
	var out struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("/tokenize: %v: %s", err, body)
	}
	return out.Tokens
}

// tokenDiff shows two id sequences from their first difference on, with
// the text of each id.
func tokenDiff(tok *tokenize.Tokenizer, want, got []uint32) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	show := func(ids []uint32) string {
		var b strings.Builder
		for _, id := range ids[i:min(len(ids), i+12)] {
			fmt.Fprintf(&b, " %d:%q", id, tok.DecodeString([]uint32{id}, false))
		}
		return b.String()
	}
	return fmt.Sprintf("  first difference at %d of %d (kvgate) / %d (llama.cpp)\n  kvgate:   %s\n  llama.cpp:%s",
		i, len(want), len(got), show(want), show(got))
}

// llamaCompletion is what the test reads of /completion's answer.
type llamaCompletion struct {
	Content         string `json:"content"`
	TokensPredicted int    `json:"tokens_predicted"`
	TokensEvaluated int    `json:"tokens_evaluated"`
	TokensCached    int    `json:"tokens_cached"`
	Timings         struct {
		CacheN          int     `json:"cache_n"`
		PromptN         int     `json:"prompt_n"`
		PromptPerSecond float64 `json:"prompt_per_second"`
		PredictedN      int     `json:"predicted_n"`
	} `json:"timings"`
}

func llamaComplete(t *testing.T, base string, prompt []uint32, n int) llamaCompletion {
	t.Helper()
	resp, body := post(t, base+"/completion", map[string]any{
		"prompt": prompt, "n_predict": n, "temperature": 0, "seed": 1,
		"cache_prompt": true, "ignore_eos": true,
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/completion %d: %s", resp.StatusCode, body)
	}
	var c llamaCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("/completion: %v: %s", err, body)
	}
	return c
}

// TestLlamaCppPromptCache checks that greedy completions run and repeat,
// and that a repeated ~3,000-token prompt is served from llama.cpp's prompt
// cache, as its native and OpenAI endpoints both report.
func TestLlamaCppPromptCache(t *testing.T) {
	srv := llamacpptest.Start(t, llamacpp.Config{CtxSize: 8192})
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var prompt []uint32
	for i := 0; len(prompt) < 3000; i++ {
		prompt = tok.Encode(prompt, fmt.Sprintf("Paragraph %d: the router sends each prompt to the engine that holds its prefix. "+
			"func f(x int) int { return x*x + 1 } // 東京 🍕\n", i), false)
	}

	first := llamaComplete(t, srv.URL, prompt, 8)
	if first.TokensPredicted != 8 || first.Timings.PromptN != len(prompt) {
		t.Fatalf("first: %d predicted, %d prompt tokens evaluated of %d: %+v", first.TokensPredicted, first.Timings.PromptN, len(prompt), first)
	}
	t.Logf("prefill of %d tokens: %.0f tokens/s", first.Timings.PromptN, first.Timings.PromptPerSecond)

	second := llamaComplete(t, srv.URL, prompt, 8)
	if second.Content != first.Content {
		t.Errorf("greedy completions differ: %q then %q", first.Content, second.Content)
	}
	t.Logf("repeat: cache_n %d, prompt_n %d, tokens_cached %d", second.Timings.CacheN, second.Timings.PromptN, second.TokensCached)
	if second.Timings.CacheN < len(prompt)-1 || second.Timings.PromptN > 1 {
		t.Errorf("repeat: cache_n %d, prompt_n %d of %d tokens: not served from the prompt cache", second.Timings.CacheN, second.Timings.PromptN, len(prompt))
	}

	// The OpenAI endpoint reports the same through usage.
	resp, body := post(t, srv.URL+"/v1/completions", map[string]any{
		"prompt": prompt, "max_tokens": 4, "temperature": 0, "cache_prompt": true,
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/completions %d: %s", resp.StatusCode, body)
	}
	var oa struct {
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &oa); err != nil {
		t.Fatal(err)
	}
	t.Logf("/v1/completions: prompt_tokens %d, cached_tokens %d", oa.Usage.PromptTokens, oa.Usage.PromptTokensDetails.CachedTokens)
	if oa.Usage.PromptTokens != len(prompt) || oa.Usage.PromptTokensDetails.CachedTokens < len(prompt)-1 {
		t.Errorf("/v1/completions usage %+v for a cached %d-token prompt", oa.Usage, len(prompt))
	}
}
