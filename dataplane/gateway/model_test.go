package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/ebpf"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

const (
	llamaModel = "meta-llama/Llama-2-7b-hf"
	llamaDir   = "../tokenize/testdata/families/llama2"
)

// multiModel is a gateway serving two models (the built-in Qwen3 as
// Qwen/Qwen3-8B, alias "qwen"; Llama 2 as llamaModel, alias "llama"),
// each on two simulated engines of its own (the Qwen ones with a LoRA
// adapter, sql-lora), plus one engine announcing a model no --model names.
type multiModel struct {
	*testGateway
	g              *Gateway
	qwen, llama    *Model
	qwenIDs, llIDs []string
}

func startMultiModel(t *testing.T) *multiModel {
	t.Helper()
	models, err := LoadModels([]ModelSpec{
		{Name: model, Dir: BuiltinDir, Aliases: []string{"qwen"}},
		{Name: llamaModel, Dir: llamaDir, Aliases: []string{"llama"}, MaxModelLen: 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	ids := map[string][]string{}
	for _, s := range []struct{ model, prefix string }{{model, "qwen"}, {llamaModel, "llama"}, {"orphan/model", "orphan"}} {
		cfg := sim.DefaultConfig()
		cfg.Rank.Model, cfg.Rank.Profile, cfg.Rank.NoRandomEOS = s.model, sim.ZeroProfile, true
		if s.model == model {
			cfg.LoRAs = []wire.LoRA{{ID: 1, Name: "sql-lora"}} // an adapter of Qwen3: its tokenizer
		}
		n := 2
		if s.prefix == "orphan" {
			n = 1
		}
		sims, err := sim.StartLocal(n, cfg, s.prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sims.Close)
		addrs = append(addrs, sims.Addrs...)
		ids[s.prefix] = sims.IDs
	}
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), addrs)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, len(addrs)); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	g := &Gateway{Models: models, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool,
		Log: slog.New(slog.NewTextHandler(logs, nil)), Retries: 1, FirstTokenTimeout: time.Minute}
	return &multiModel{testGateway: serveGateway(t, g, logs), g: g, qwen: models[0], llama: models[1],
		qwenIDs: ids["qwen"], llIDs: ids["llama"]}
}

// completion sends a completion for name and returns the serving engine
// and the prompt tokens the engine counted.
func (mm *multiModel) completion(t *testing.T, name, prompt string) (engineID string, promptTokens int) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":2}`, name, prompt)
	resp, b := post(t, mm.base+"/v1/completions", "", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
	}
	var out struct {
		Model string
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(b), &out); err != nil {
		t.Fatal(err)
	}
	if canonical, _ := mm.g.resolve(name); out.Model != canonical {
		t.Fatalf("a request for %s answered as model %q, want %q", name, out.Model, canonical)
	}
	return resp.Header.Get("x-kvgate-engine"), out.Usage.PromptTokens
}

// TestManyModels: each model's requests (by name or alias) land only on
// its own engines, tokenized by its own tokenizer (the engine's prompt
// count is that tokenizer's), and the two tokenizers really differ on
// the prompt.
func TestManyModels(t *testing.T) {
	mm := startMultiModel(t)
	prompt := "The quick brown fox jumps over the lazy dog, 12345 times: 你好"
	qn := len(mm.qwen.Tok.Encode(nil, prompt, true))
	ln := len(mm.llama.Tok.Encode(nil, prompt, true))
	if qn == ln {
		t.Fatalf("both tokenizers give %d tokens: the test cannot tell them apart", qn)
	}
	cases := []struct {
		name string
		ids  []string
	}{{model, mm.qwenIDs}, {"qwen", mm.qwenIDs}, {"sql-lora", mm.qwenIDs}, {llamaModel, mm.llIDs}, {"llama", mm.llIDs}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range 6 {
				p := fmt.Sprintf("%s %d", prompt, i)
				e, n := mm.completion(t, c.name, p)
				if !slices.Contains(c.ids, e) {
					t.Fatalf("request %d for %s served by %q, not one of its engines %v", i, c.name, e, c.ids)
				}
				if want := len(mm.tokOf(c.name).Encode(nil, p, true)); n != want {
					t.Fatalf("request %d for %s: engine counted %d prompt tokens, its tokenizer %d", i, c.name, n, want)
				}
			}
		})
	}
}

func (mm *multiModel) tokOf(name string) *tokenize.Tokenizer {
	_, m := mm.g.resolve(name)
	return m.Tok
}

// TestManyModelsKeepCachesApart: the same token ids sent as two models'
// prompts never match across them: once a Qwen engine holds a prompt's
// blocks, routing that prompt for Llama 2 picks a Llama engine and
// predicts nothing cached, and the Qwen engines still predict theirs.
func TestManyModelsKeepCachesApart(t *testing.T) {
	mm := startMultiModel(t)
	ids := make([]uint32, 256)
	for i := range ids {
		ids[i] = uint32(100 + i*7%31000) // inside both vocabularies
	}
	idsJSON, _ := json.Marshal(ids)
	resp, b := post(t, mm.base+"/v1/completions", "", fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":1}`, model, idsJSON))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	routeFor := func(name string) *route.Decision {
		d, err := mm.g.Router.Route(&route.Request{Model: name, Tokens: ids})
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
		return d
	}
	deadline := time.Now().Add(30 * time.Second)
	for routeFor(model).PredictedCached < 240 { // the KV events of the Qwen engine arrive
		if time.Now().After(deadline) {
			t.Fatal("the Qwen engine's blocks never reached the index")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One decision: it records the prompt as approximate entries on the
	// Llama engine it picks (which has sent no event yet), so a second
	// would match those.
	d := routeFor(llamaModel)
	if !slices.Contains(mm.llIDs, d.Engine.Info().ID) || d.PredictedCached != 0 || d.Match.Depth() != 0 {
		t.Fatalf("Llama 2 prompt routed to %s predicting %d cached tokens (%+v): the Qwen engine's blocks matched",
			d.Engine.Info().ID, d.PredictedCached, d.Match)
	}
	if d := routeFor(model); !slices.Contains(mm.qwenIDs, d.Engine.Info().ID) || d.PredictedCached < 240 {
		t.Fatalf("Qwen prompt routed to %s predicting %d cached tokens, want its engine's 240 or more", d.Engine.Info().ID, d.PredictedCached)
	}
}

// TestManyModelsEndpoints: /v1/models in both shapes, the 404s of an
// unknown model in both APIs, the refusal of a model with engines but no
// tokenizer, and /tokenize and /detokenize by model.
func TestManyModelsEndpoints(t *testing.T) {
	mm := startMultiModel(t)
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			Aliases []string
			Alias   string `json:"alias_of"`
		}
	}
	getJSON(t, mm.base+"/v1/models", nil, &list)
	got := map[string]string{}
	for _, d := range list.Data {
		got[d.ID] = d.Alias + strings.Join(d.Aliases, ",")
	}
	want := map[string]string{model: "qwen", "qwen": model, llamaModel: "llama", "llama": llamaModel, "orphan/model": "", "sql-lora": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("/v1/models: %v, want %v", got, want)
	}
	var page struct {
		Data    []struct{ Type, ID string }
		HasMore *bool  `json:"has_more"`
		FirstID string `json:"first_id"`
	}
	getJSON(t, mm.base+"/v1/models", http.Header{"Anthropic-Version": {"2023-06-01"}}, &page)
	if len(page.Data) != 6 || page.Data[0].Type != "model" || page.HasMore == nil || page.FirstID != model {
		t.Fatalf("Anthropic /v1/models: %+v", page)
	}

	refusals := []struct {
		name, path, body string
		status           int
		want             []string
	}{
		{"unknown, OpenAI", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
			404, []string{`{"error":{`, `"type":"not_found_error"`}},
		{"unknown, Anthropic", "/v1/messages", `{"model":"nope","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`,
			404, []string{`"type":"error"`, `"type":"not_found_error"`}},
		{"no tokenizer", "/v1/completions", `{"model":"orphan/model","prompt":"hi"}`, 500, []string{`no tokenizer for it`}},
		{"no tokenizer, again", "/v1/messages", `{"model":"orphan/model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
			500, []string{`no tokenizer for it`, `"type":"error"`}},
		{"no chat template", "/v1/chat/completions", `{"model":"llama","messages":[{"role":"user","content":"hi"}]}`,
			400, []string{`has no chat template`}},
		{"tokenize without a model", "/tokenize", `{"prompt":"hi"}`, 400, []string{`serves several models`}},
		{"tokenize, unknown", "/tokenize", `{"model":"nope","prompt":"hi"}`, 404, []string{`not served here`}},
	}
	for _, c := range refusals {
		resp, b := post(t, mm.base+c.path, "", c.body)
		for _, w := range c.want {
			if resp.StatusCode != c.status || !strings.Contains(b, w) {
				t.Errorf("%s: %d %s, want %d with %s", c.name, resp.StatusCode, b, c.status, w)
			}
		}
	}
	if n := strings.Count(mm.log.String(), "engines serve a model no --model names"); n != 1 {
		t.Errorf("the model without a tokenizer logged %d times, want once:\n%s", n, mm.log.String())
	}
	if resp, b := post(t, mm.base+"/v1/chat/completions", "", `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("qwen chat: %d %s", resp.StatusCode, b)
	}

	text := "Hello, wörld 123"
	for _, name := range []string{"qwen", llamaModel} {
		var tk struct {
			Tokens      []uint32
			MaxModelLen int `json:"max_model_len"`
		}
		resp, b := post(t, mm.base+"/tokenize", "", fmt.Sprintf(`{"model":%q,"prompt":%q}`, name, text))
		if err := json.Unmarshal([]byte(b), &tk); resp.StatusCode != 200 || err != nil {
			t.Fatalf("/tokenize %s: %d %s", name, resp.StatusCode, b)
		}
		tok := mm.tokOf(name)
		if want := tok.Encode(nil, text, true); !slices.Equal(tk.Tokens, want) {
			t.Fatalf("/tokenize %s: %v, its tokenizer gives %v", name, tk.Tokens, want)
		}
		if name == llamaModel && tk.MaxModelLen != 4096 {
			t.Fatalf("/tokenize %s: max_model_len %d, want the model's 4096", name, tk.MaxModelLen)
		}
		ids, _ := json.Marshal(tk.Tokens)
		_, b = post(t, mm.base+"/detokenize", "", fmt.Sprintf(`{"model":%q,"tokens":%s}`, name, ids))
		var dt struct{ Prompt string }
		if want := tok.DecodeString(tk.Tokens, false); json.Unmarshal([]byte(b), &dt) != nil || dt.Prompt != want {
			t.Fatalf("/detokenize %s: %s, want %q", name, b, want)
		}
	}
}

func getJSON(t *testing.T, url string, h http.Header, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}

// TestSetModels: models replaced while serving take the next request;
// the old names are gone, the new alias answers.
func TestSetModels(t *testing.T) {
	mm := startMultiModel(t)
	llama, err := (ModelSpec{Name: llamaModel, Dir: llamaDir, Aliases: []string{"llama-chat"}}).Load()
	if err != nil {
		t.Fatal(err)
	}
	mm.g.SetModels([]*Model{llama})
	if e, _ := mm.completion(t, "llama-chat", "hello"); !slices.Contains(mm.llIDs, e) {
		t.Fatalf("served by %q, want one of %v", e, mm.llIDs)
	}
	if resp, b := post(t, mm.base+"/v1/completions", "", `{"model":"qwen","prompt":"hi"}`); resp.StatusCode != 404 {
		t.Fatalf("a removed alias: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, mm.base+"/v1/completions", "", fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, model)); resp.StatusCode != 500 ||
		!strings.Contains(b, "no tokenizer") {
		t.Fatalf("a model whose engines stay but whose tokenizer went: %d %s", resp.StatusCode, b)
	}
}

// TestAliasOfHTTPEngineModel: an HTTP engine gets the client's request
// unchanged, so an alias it does not know is refused by name before it
// is forwarded.
func TestAliasOfHTTPEngineModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"http/model","object":"model"}]}`)
	}))
	defer srv.Close()
	pp, err := passthrough.NewPool([]string{srv.URL}, ebpf.NewCopy(), route.DefaultWeights(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pp.Start(10 * time.Millisecond)
	defer pp.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !pp.Serves("http/model") {
		if time.Now().After(deadline) {
			t.Fatal("the HTTP engine's models never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok, _ := tokenize.Builtin()
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), nil)
	defer pool.Close()
	logs := &syncBuffer{}
	g := &Gateway{Models: []*Model{{Name: "http/model", Aliases: []string{"hm"}, Tok: tok}}, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()),
		Pool: pool, Passthrough: pp, Log: slog.New(slog.NewTextHandler(logs, nil)), FirstTokenTimeout: time.Minute}
	tg := serveGateway(t, g, logs)
	resp, b := post(t, tg.base+"/v1/completions", "", `{"model":"hm","prompt":"hi"}`)
	if resp.StatusCode != 400 || !strings.Contains(b, `"param":"model"`) || !strings.Contains(b, `ask for \"http/model\"`) {
		t.Fatalf("an alias of an HTTP engine's model: %d %s", resp.StatusCode, b)
	}
}
