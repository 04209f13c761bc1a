package gateway

import (
	"fmt"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

func (g *Gateway) completions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	req, e := api.DecodeCompletion(r.Body, g.checkModel)
	return g.generate(w, r, reqID, req, e)
}

func (g *Gateway) chatCompletions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	req, e := api.DecodeChat(r.Body, g.checkModel)
	return g.generate(w, r, reqID, req, e)
}

func (g *Gateway) messages(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	req, e := api.DecodeMessages(r.Body, g.checkModel)
	return g.generate(w, r, reqID, req, e)
}

func (g *Gateway) responses(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	req, e := api.DecodeResponses(r.Body, g.checkModel)
	return g.generate(w, r, reqID, req, e)
}

// generate serves a decoded generation request of any API: it checks the
// model and the prompt against the fleet and the tokenizer, then hands the
// request to an HTTP engine or runs it on the wire engines.
func (g *Gateway) generate(w *httpx.ResponseWriter, r *httpx.Request, reqID string, req *api.Request, e *api.Error) int {
	flavor := api.OpenAI
	if req != nil {
		flavor = req.Kind.Flavor()
	} else if r.Path == "/v1/messages" {
		flavor = api.Anthropic
	}
	var tokens []uint32
	var prompt string
	if e == nil {
		e = checkFields(req)
	}
	if e == nil {
		e = g.checkExtras(req)
	}
	if e == nil {
		tokens, prompt, e = g.promptTokens(req)
	}
	if e == nil {
		e = g.fitContext(req, len(tokens))
	}
	if e != nil {
		return writeError(w, flavor, e)
	}
	gr := &genRequest{Request: req, id: reqID, tokens: tokens, parser: g.outputParser(req, prompt), prompt: prompt}
	if status, ok := g.passthrough(w, r, gr, flavor); ok {
		return status
	}
	if req.N > 1 {
		return g.fanOut(w, gr)
	}
	return g.run(w, gr, g.encoder(gr))
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
		return &api.OpenAIEncoder{ID: "chatcmpl-" + req.id, Model: req.Model, Created: time.Now().Unix(), Chat: true,
			Stream: req.Stream, IncludeUsage: req.IncludeUsage, Logprobs: req.Extras.Logprobs}
	}
	return &api.OpenAIEncoder{ID: "cmpl-" + req.id, Model: req.Model, Created: time.Now().Unix(),
		Stream: req.Stream, IncludeUsage: req.IncludeUsage, Logprobs: req.Extras.Logprobs, Echo: g.echo(req)}
}

// echo is a completion's prompt text when the client asked for it back:
// the prompt it sent, or the text of the token ids it sent.
func (g *Gateway) echo(req *genRequest) string {
	switch {
	case !req.Echo:
		return ""
	case req.Prompt.IsIDs:
		return g.Tok.DecodeString(req.tokens, false)
	}
	return req.Prompt.Text
}

// checkModel refuses a model no engine serves: 404, or 503 while some
// engine has not yet said what it serves.
func (g *Gateway) checkModel(model string) *api.Error {
	if g.serves(model) {
		return nil
	}
	if g.connecting() {
		return &api.Error{Status: 503, Message: "engines are still connecting; model " + model + " is not known yet", RetryAfter: 1}
	}
	return api.NotFound(fmt.Sprintf("model %q is not served here (see GET /v1/models)", model))
}

// promptTokens tokenizes the request's prompt or renders and tokenizes
// its conversation (returning the rendered text too), giving up as soon
// as it is over the prompt limit.
func (g *Gateway) promptTokens(req *api.Request) ([]uint32, string, *api.Error) {
	limit := g.promptCap(req.Model)
	if req.Kind != api.Completion {
		return g.chatTokens(&req.Conversation, limit, req)
	}
	if !req.Prompt.IsIDs {
		ids, over, counted := encodeBounded(g.Tok, req.Prompt.Text, true, limit)
		if over {
			return nil, "", g.overPrompt(req, counted)
		}
		return ids, req.Prompt.Text, nil
	}
	if e := g.checkVocab("prompt", req.Prompt.IDs); e != nil {
		return nil, "", e
	}
	return req.Prompt.IDs, "", nil
}

// checkVocab refuses token ids outside the tokenizer's vocabulary.
func (g *Gateway) checkVocab(field string, ids []uint32) *api.Error {
	for _, id := range ids {
		if int(id) >= g.Tok.VocabSize() {
			return api.BadRequest(field, fmt.Sprintf("token id %d is outside the vocabulary", id))
		}
	}
	return nil
}

// chatTokens renders and tokenizes a conversation as the tokenizer's
// EncodeChat does (added tokens recognised, no post-processor tokens),
// giving up past limit tokens (0: no limit).
func (g *Gateway) chatTokens(c *api.Conversation, limit int, req *api.Request) ([]uint32, string, *api.Error) {
	tmpl := g.Tok.Chat()
	if tmpl == nil {
		return nil, "", api.BadRequest("messages", "the tokenizer has no chat template")
	}
	text, err := tmpl.Render(&tokenize.ChatInput{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Extra: c.Kwargs})
	if err != nil {
		return nil, "", api.BadRequest("messages", err.Error())
	}
	if limit <= 0 {
		return g.Tok.Encode(nil, text, false), text, nil
	}
	ids, over, counted := encodeBounded(g.Tok, text, false, limit)
	if over {
		return nil, "", g.overPrompt(req, counted)
	}
	return ids, text, nil
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
