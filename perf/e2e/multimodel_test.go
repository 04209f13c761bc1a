//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// TestManyModels: one kvgate in front of kvgate-sim processes serving two
// models, the built-in Qwen3 (two engines) and Llama 2 (two engines, its
// tokenizer from dataplane/tokenize/testdata, its --model line in the
// --config file): every request lands only on its model's engines, the
// engine's prompt token count is that model's tokenizer's, /v1/models
// lists both models with their aliases (in both APIs' shapes), /tokenize
// uses the named model's tokenizer, and an unknown model is a 404 in both
// APIs.
func TestManyModels(t *testing.T) {
	const llama = "meta-llama/Llama-2-7b-hf"
	llamaDir, err := filepath.Abs("../../dataplane/tokenize/testdata/families/llama2")
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string][]string{} // model -> engine ids
	var addrs []string
	for _, m := range []string{model, llama} {
		for i := range 2 {
			id := fmt.Sprintf("%s-%d", strings.ToLower(m[:4]), i)
			p := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", id, "--model", m, "--profile", "zero")
			addrs = append(addrs, p.waitLog(t, "serving")["addr"].(string))
			engines[m] = append(engines[m], id)
		}
	}
	conf := filepath.Join(t.TempDir(), "kvgate.conf")
	if err := os.WriteFile(conf, []byte("model = "+llama+"="+llamaDir+",alias=llama2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := startKvgate(t, "--engine", strings.Join(addrs, ","), "--config", conf, "--model", model+"=builtin,alias=qwen")
	waitReady(t, base)

	qwenTok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	llamaTok, err := tokenize.LoadDir(llamaDir)
	if err != nil {
		t.Fatal(err)
	}
	prompt := "Routing keeps models apart: 12345 tokens, naïve café, 你好 🙂"
	if len(qwenTok.Encode(nil, prompt, true)) == len(llamaTok.Encode(nil, prompt, true)) {
		t.Fatal("the two tokenizers count the prompt alike: the test cannot tell them apart")
	}
	for _, c := range []struct {
		name, model string
		tok         *tokenize.Tokenizer
	}{{model, model, qwenTok}, {"qwen", model, qwenTok}, {llama, llama, llamaTok}, {"llama2", llama, llamaTok}} {
		for i := range 8 {
			p := fmt.Sprintf("%s #%d", prompt, i)
			resp, body := post(t, base+"/v1/completions", map[string]any{"model": c.name, "prompt": p, "max_tokens": 2})
			var out struct {
				Model string
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				}
			}
			if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
				t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
			}
			if e := resp.Header.Get("x-kvgate-engine"); !slices.Contains(engines[c.model], e) {
				t.Fatalf("a request for %s was served by %q, not one of %v", c.name, e, engines[c.model])
			}
			if want := len(c.tok.Encode(nil, p, true)); out.Usage.PromptTokens != want || out.Model != c.model {
				t.Fatalf("%s: engine counted %d prompt tokens as model %q; %s's tokenizer gives %d", c.name, out.Usage.PromptTokens, out.Model, c.model, want)
			}
		}
	}
	for _, c := range []struct {
		name string
		tok  *tokenize.Tokenizer
	}{{"qwen", qwenTok}, {"llama2", llamaTok}} {
		resp, body := post(t, base+"/tokenize", map[string]any{"model": c.name, "prompt": prompt})
		var tk struct{ Tokens []uint32 }
		if resp.StatusCode != 200 || json.Unmarshal(body, &tk) != nil || !slices.Equal(tk.Tokens, c.tok.Encode(nil, prompt, true)) {
			t.Fatalf("/tokenize %s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	// A chat and a Messages request for Qwen3 render its template and land on its engines.
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		resp, body := post(t, base+path, map[string]any{"model": "qwen", "messages": msgs, "max_tokens": 2})
		if resp.StatusCode != 200 || !slices.Contains(engines[model], resp.Header.Get("x-kvgate-engine")) {
			t.Fatalf("%s for qwen: %d from %q: %s", path, resp.StatusCode, resp.Header.Get("x-kvgate-engine"), body)
		}
	}

	var list struct {
		Data []struct {
			ID      string `json:"id"`
			Object  string
			Aliases []string
		}
	}
	getModels(t, base, nil, &list)
	ids := map[string][]string{}
	for _, d := range list.Data {
		ids[d.ID] = d.Aliases
	}
	if !slices.Equal(ids[model], []string{"qwen"}) || !slices.Equal(ids[llama], []string{"llama2"}) || len(ids) != 4 {
		t.Fatalf("/v1/models: %+v", list.Data)
	}
	var page struct{ Data []struct{ Type, ID string } }
	getModels(t, base, http.Header{"Anthropic-Version": {"2023-06-01"}}, &page)
	if len(page.Data) != 4 || page.Data[0].Type != "model" {
		t.Fatalf("Anthropic /v1/models: %+v", page.Data)
	}

	resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": "mistral", "messages": msgs})
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"type":"not_found_error"`) || !strings.Contains(string(body), `{"error":{`) {
		t.Fatalf("unknown model, OpenAI: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/v1/messages", map[string]any{"model": "mistral", "max_tokens": 2, "messages": msgs})
	var anth struct {
		Type  string
		Error struct{ Type string }
	}
	if resp.StatusCode != 404 || json.Unmarshal(body, &anth) != nil || anth.Type != "error" || anth.Error.Type != "not_found_error" {
		t.Fatalf("unknown model, Anthropic: %d %s", resp.StatusCode, body)
	}
}

func getModels(t *testing.T, base string, h http.Header, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/models", nil)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %d %v", resp.StatusCode, err)
	}
}
