package gateway

import (
	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
)

// tokenizeEndpoint serves vLLM's POST /tokenize: prompt or messages in,
// tokens and count out.
func (g *Gateway) tokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	req, e := api.DecodeTokenize(r.Body)
	if e != nil {
		return writeError(w, api.OpenAI, e)
	}
	var ids []uint32
	if req.Prompt != nil {
		ids = g.Tok.Encode(nil, *req.Prompt, req.AddSpecialTokens)
	} else if ids, _, e = g.chatTokens(&req.Conversation, 0, nil); e != nil {
		return writeError(w, api.OpenAI, e)
	}
	return writeJSON(w, 200, api.EncodeTokenize(ids, g.Tok.Config.ModelMaxLength))
}

// detokenizeEndpoint serves vLLM's POST /detokenize.
func (g *Gateway) detokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	ids, e := api.DecodeDetokenize(r.Body)
	if e == nil {
		e = g.checkVocab("tokens", ids)
	}
	if e != nil {
		return writeError(w, api.OpenAI, e)
	}
	return writeJSON(w, 200, api.EncodeDetokenize(g.Tok.DecodeString(ids, false)))
}
