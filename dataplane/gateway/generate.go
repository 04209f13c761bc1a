package gateway

import (
	"fmt"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

func (g *Gateway) completions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	p := &modelPick{g: g}
	req, e := api.DecodeCompletion(r.Body, p.check)
	return g.generate(w, r, reqID, req, p, e)
}

func (g *Gateway) chatCompletions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	p := &modelPick{g: g}
	req, e := api.DecodeChat(r.Body, p.check)
	return g.generate(w, r, reqID, req, p, e)
}

func (g *Gateway) messages(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	p := &modelPick{g: g}
	req, e := api.DecodeMessages(r.Body, p.check)
	return g.generate(w, r, reqID, req, p, e)
}

func (g *Gateway) responses(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	p := &modelPick{g: g}
	req, e := api.DecodeResponses(r.Body, p.check)
	return g.generate(w, r, reqID, req, p, e)
}

// modelPick is a decoder's model check (api.ModelCheck) that keeps the
// model it found: the name engines know it by and its tokenizer.
type modelPick struct {
	g     *Gateway
	asked string // the request's model: a name, an alias or an adapter
	name  string
	m     *Model
}

func (p *modelPick) check(model string) *api.Error {
	var e *api.Error
	p.asked = model
	p.name, p.m, e = p.g.modelFor(model)
	return e
}

// generate serves a decoded generation request of any API: it checks the
// model and the prompt against the fleet and the model's tokenizer, then
// hands the request to an HTTP engine or runs it on the wire engines.
func (g *Gateway) generate(w *httpx.ResponseWriter, r *httpx.Request, reqID string, req *api.Request, p *modelPick, e *api.Error) int {
	x := g.Observe.parsed(w, req) // accesslog.go: nil when the request is not observed
	flavor := api.OpenAI
	if req != nil {
		flavor = req.Kind.Flavor()
	} else if r.Path == "/v1/messages" {
		flavor = api.Anthropic
	}
	gr := genRequests.Get().(*genRequest) // genpool.go: given back once its response is over
	var tokens []uint32
	var prompt string
	if e == nil && p.m == nil {
		e = p.check(req.Model) // every decoder checks the model; this is a guard
	}
	if e == nil {
		e = g.checkAliasForwarded(p)
	}
	if e == nil {
		req.Model = p.name // an alias is served as its model
		e = checkFields(req)
	}
	if e == nil {
		e = checkExtras(p.m, req)
	}
	if e == nil {
		e = g.checkMedia(p.m, req)
	}
	ctx := 0 // the model's context length, looked up once (limits.go)
	if e == nil {
		ctx = g.contextLength(p.m, req.Model)
		t0 := x.now()
		tokens, prompt, e = g.promptTokens(gr.ids, p.m, req, tenantOf(r), promptCapOf(ctx))
		x.tokenized(t0, len(tokens), e)
	}
	if e == nil {
		tokens, e = g.placeMedia(p.m, req, tokens) // media.go
	}
	if e == nil {
		e = fitContext(req, len(tokens), ctx)
	}
	if e != nil {
		x.failed(e)
		putGenRequest(gr)
		return writeError(w, flavor, e)
	}
	gr.Request, gr.id, gr.tokens, gr.model, gr.parser, gr.prompt, gr.x = req, reqID, tokens, p.m, outputParser(p.m, req, prompt), prompt, x
	if req.Kind == api.Completion && !req.Prompt.IsIDs {
		gr.ids = tokens // encoded into gr.ids's room, or room of their own: gr's either way, kept with it
	}
	if status, ok := g.passthrough(w, r, gr, flavor); ok {
		return status // gr is not given back: the relay's goroutine may still read it
	}
	if req.N > 1 {
		return g.fanOut(w, gr) // nor here: a choice's goroutine may outlive the response
	}
	status := g.run(w, gr, g.encoder(gr))
	putGenRequest(gr) // the response is over: nothing reads gr or its encoder any more
	return status
}

// checkAliasForwarded refuses an alias of a model only HTTP engines
// serve, unless they answer to the alias too: they get the client's
// request unchanged, alias and all.
func (g *Gateway) checkAliasForwarded(p *modelPick) *api.Error {
	if p.asked == p.name || g.Passthrough == nil || g.servesWire(p.name) || !g.Passthrough.Serves(p.name) || g.Passthrough.Serves(p.asked) {
		return nil
	}
	return api.BadRequest("model", fmt.Sprintf("%q is kvgate's alias of %q, which only HTTP engines serve; they receive the request unchanged and do not know the alias: ask for %q",
		p.asked, p.name, p.name))
}

// encoder is the response encoder of req's API.
func (g *Gateway) encoder(req *genRequest) api.Encoder {
	switch req.Kind {
	case api.Messages:
		return &api.AnthropicEncoder{ID: "msg_" + req.id, Model: req.Model, Stream: req.Stream, PromptTokens: uint32(len(req.tokens))}
	case api.Responses:
		return &api.ResponsesEncoder{ID: "resp_" + req.id, Model: req.Model, Created: time.Now().Unix(), Stream: req.Stream,
			PromptTokens: uint32(len(req.tokens))}
	case api.Chat:
		e := &req.oai
		e.Reset(api.OpenAIEncoder{ID: req.responseID("chatcmpl-"), Model: req.Model, Created: time.Now().Unix(), Chat: true,
			Stream: req.Stream, IncludeUsage: req.IncludeUsage, Logprobs: req.Extras.Logprobs})
		return e
	}
	e := &req.oai
	e.Reset(api.OpenAIEncoder{ID: req.responseID("cmpl-"), Model: req.Model, Created: time.Now().Unix(),
		Stream: req.Stream, IncludeUsage: req.IncludeUsage, Logprobs: req.Extras.Logprobs, Echo: g.echo(req)})
	return e
}

// echo is a completion's prompt text when the client asked for it back:
// the prompt it sent, or the text of the token ids it sent.
func (g *Gateway) echo(req *genRequest) string {
	switch {
	case !req.Echo:
		return ""
	case req.Prompt.IsIDs:
		return req.model.Tok.DecodeString(req.tokens, false)
	}
	return req.Prompt.Text
}

// promptTokens tokenizes the request's prompt with model m's tokenizer,
// or renders and tokenizes its conversation (returning the rendered text
// too, continuing tenant's earlier turns: chatPrompt), giving up as soon
// as it is over limit (promptCap). A completion's ids take dst's room when
// it has enough.
func (g *Gateway) promptTokens(dst []uint32, m *Model, req *api.Request, tenant string, limit int) ([]uint32, string, *api.Error) {
	if req.Kind != api.Completion {
		return g.chatPrompt(m, &req.Conversation, limit, req, tenant)
	}
	if !req.Prompt.IsIDs {
		ids, over, counted := encodeBounded(dst, m.Tok, req.Prompt.Text, true, limit)
		if over {
			return nil, "", g.overPrompt(m, req, counted)
		}
		return ids, req.Prompt.Text, nil
	}
	if e := checkVocab(m.Tok, "prompt", req.Prompt.IDs); e != nil {
		return nil, "", e
	}
	return req.Prompt.IDs, "", nil
}

// checkVocab refuses token ids outside the tokenizer's vocabulary.
func checkVocab(tok *tokenize.Tokenizer, field string, ids []uint32) *api.Error {
	for _, id := range ids {
		if int(id) >= tok.VocabSize() {
			return api.BadRequest(field, fmt.Sprintf("token id %d is outside the vocabulary", id))
		}
	}
	return nil
}

// chatTokens is chatPrompt for no tenant.
func (g *Gateway) chatTokens(m *Model, c *api.Conversation, limit int, req *api.Request) ([]uint32, string, *api.Error) {
	return g.chatPrompt(m, c, limit, req, "")
}

// connecting reports whether some engine has never completed a handshake,
// so the set of served models may still grow.
func (g *Gateway) connecting() bool {
	for _, e := range g.Pool.Engines() {
		if e.Info().ID == "" {
			return true
		}
	}
	return false
}

// serves reports whether a wire engine or an HTTP engine serves model.
func (g *Gateway) serves(model string) bool {
	return g.servesWire(model) || (g.Passthrough != nil && g.Passthrough.Serves(model))
}

func (g *Gateway) servesWire(model string) bool {
	for _, e := range g.Pool.Engines() {
		if e.Serves(model) {
			return true
		}
	}
	return false
}
