package gateway

import (
	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// tokenizeEndpoint serves vLLM's POST /tokenize: prompt or messages in,
// tokens and count out, with the tokenizer of the request's model.
func (g *Gateway) tokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	req, e := api.DecodeTokenize(r.Body)
	if e != nil {
		return writeError(w, api.OpenAI, e)
	}
	name, m, e := g.tokenizerOf(req.Model)
	if e != nil {
		return writeError(w, api.OpenAI, e)
	}
	var ids []uint32
	if req.Prompt != nil {
		ids = m.Tok.Encode(nil, *req.Prompt, req.AddSpecialTokens)
	} else if ids, e = g.tokenizeChat(name, m, req); e != nil {
		return writeError(w, api.OpenAI, e)
	}
	return writeJSON(w, 200, api.EncodeTokenize(ids, g.contextLength(m, name)))
}

// detokenizeEndpoint serves vLLM's POST /detokenize, with the tokenizer
// of the request's model.
func (g *Gateway) detokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	ids, e := api.DecodeDetokenize(r.Body)
	var m *Model
	if e == nil {
		_, m, e = g.tokenizerOf(api.RequestModel(r.Body))
	}
	if e == nil {
		e = checkVocab(m.Tok, "tokens", ids)
	}
	if e != nil {
		return writeError(w, api.OpenAI, e)
	}
	return writeJSON(w, 200, api.EncodeDetokenize(m.Tok.DecodeString(ids, false)))
}

// tokenizerOf is the model whose tokenizer /tokenize and /detokenize use
// for a request naming model: the one-model shorthand's whatever the name
// (as before there were several); with Models, the model named (or
// aliased, or an adapter's base), which needs no engine up, and with no
// name the only model configured. An unknown name is a 404.
func (g *Gateway) tokenizerOf(model string) (string, *Model, *api.Error) {
	c := g.catalog()
	switch {
	case c.fallback != nil:
		return model, c.fallback, nil
	case model == "" && len(c.list) == 1:
		return c.list[0].Name, c.list[0], nil
	case model == "":
		return "", nil, api.BadRequest("model", "this router serves several models: name one in \"model\" (see GET /v1/models)")
	}
	if name, m := g.resolve(model); m != nil {
		return name, m, nil
	}
	if _, _, e := g.modelFor(model); e != nil {
		return "", nil, e // 404, 503 while connecting, or no tokenizer
	}
	return "", nil, api.NotFound("model " + model + " has no tokenizer here")
}

// chatPrompt renders and tokenizes a conversation with model m's chat
// template and tokenizer as the tokenizer's EncodeChat does (added tokens
// recognised, no post-processor tokens), giving up past limit tokens (0:
// no limit). A turn that continues one rendered before for the same
// tenant renders only its new messages and reuses that turn's ids
// (tokenize.RenderChat), unless it is long enough to be counted in
// windows first.
func (g *Gateway) chatPrompt(m *Model, c *api.Conversation, limit int, req *api.Request, tenant string) ([]uint32, string, *api.Error) {
	if m.Tok.Chat() == nil {
		return nil, "", api.BadRequest("messages", "the tokenizer of this model has no chat template")
	}
	p, err := m.Tok.RenderChat(&tokenize.ChatInput{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt,
		Extra: c.Kwargs, Tenant: tenant})
	if err != nil {
		return nil, "", api.BadRequest("messages", err.Error())
	}
	if limit <= 0 || len(p.Text) <= bytesPerTokenBound*limit {
		return p.Encode(nil), p.Text, nil
	}
	ids, over, counted := encodeBounded(nil, m.Tok, p.Text, false, limit)
	if over {
		return nil, "", g.overPrompt(m, req, counted)
	}
	return ids, p.Text, nil
}

// tenantOf is whose conversation a request carries, as the chat render
// cache keeps them apart: the credentials it presented, as sent.
func tenantOf(r *httpx.Request) string {
	return r.Header.Get("Authorization") + "\x00" + r.Header.Get("x-api-key")
}
