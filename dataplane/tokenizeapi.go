package dataplane

import (
	"encoding/json"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// tokenizeEndpoint serves vLLM's POST /tokenize: prompt or messages in,
// tokens and count out.
func (g *Gateway) tokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	var body struct {
		Model            string          `json:"model"`
		Prompt           *string         `json:"prompt"`
		Messages         json.RawMessage `json:"messages"`
		AddSpecialTokens *bool           `json:"add_special_tokens"`
		AddGeneration    *bool           `json:"add_generation_prompt"`
	}
	if e := decodeJSON(r.Body, &body); e != nil {
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	var ids []uint32
	switch {
	case body.Prompt != nil:
		ids = g.Tok.Encode(nil, *body.Prompt, body.AddSpecialTokens == nil || *body.AddSpecialTokens)
	case len(body.Messages) > 0:
		var e *apiError
		if ids, e = g.chatTokens(body.Messages, nil, nil, body.AddGeneration); e != nil {
			writeError(w, flavorOpenAI, e)
			return e.status
		}
	default:
		e := badRequest("prompt", "either \"prompt\" or \"messages\" is required")
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	if ids == nil {
		ids = []uint32{}
	}
	b, _ := json.Marshal(map[string]any{"tokens": ids, "count": len(ids), "max_model_len": g.Tok.Config.ModelMaxLength})
	return g.simple(w, r, 200, string(b))
}

// detokenizeEndpoint serves vLLM's POST /detokenize.
func (g *Gateway) detokenizeEndpoint(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	var body struct {
		Tokens []uint32 `json:"tokens"`
	}
	if e := decodeJSON(r.Body, &body); e != nil {
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	for _, id := range body.Tokens {
		if int(id) >= g.Tok.VocabSize() {
			e := badRequest("tokens", "token id outside the vocabulary")
			writeError(w, flavorOpenAI, e)
			return e.status
		}
	}
	b, _ := json.Marshal(map[string]any{"prompt": g.Tok.DecodeString(body.Tokens, false)})
	return g.simple(w, r, 200, string(b))
}
