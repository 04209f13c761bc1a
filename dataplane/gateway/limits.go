package gateway

import (
	"fmt"
	"unicode/utf8"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// A request must fit the model's context and the wire protocol's limits
// (wire.DefaultLimits, what every engine accepts): one that does not is
// the client's fault, answered 400 naming the field, and never reaches an
// engine, where it would break the engine's connection for every stream
// on it.
//
// The context rule is vLLM's: prompt plus max_tokens at most the context
// length, so a prompt of context-1 tokens with max_tokens 1 runs and a
// prompt of the whole context does not (vllm-project/vllm
// tests/v1/e2e/test_context_length.py at b91ee1b, and its
// Processor._validate_model_input). A max_tokens the client did not give
// is cut to what the context leaves, as vLLM does.

// contextLength is model's context in tokens (prompt plus output): the
// smallest of the model's MaxModelLen and what its engines announce in
// their handshakes (wire.FeatureContext), else the tokenizer's
// model_max_length; 0 when unknown. The smallest, so that whichever
// engine the router picks can take the request. name is the model's name
// as engines know it (an alias resolved; an adapter's own name).
func (g *Gateway) contextLength(m *Model, name string) int {
	ctx := m.MaxModelLen
	if g.Pool != nil {
		for _, e := range g.Pool.Engines() {
			if n := e.MaxModelLen(); n > 0 && (ctx <= 0 || n < ctx) && e.Serves(name) {
				ctx = n
			}
		}
	}
	if ctx > 0 {
		return ctx
	}
	return m.Tok.Config.ModelMaxLength
}

// promptCap is the most prompt tokens a request for model m may have:
// one less than the context (room for one output token) and the wire's
// limit.
func (g *Gateway) promptCap(m *Model, name string) int {
	return promptCapOf(g.contextLength(m, name))
}

// promptCapOf is promptCap for a context of ctx tokens (0: unknown).
func promptCapOf(ctx int) int {
	limit := wire.DefaultMaxTokens
	if ctx > 0 {
		limit = min(limit, ctx-1)
	}
	return max(limit, 0)
}

// checkFields refuses, before any tokenizing, what no engine can take.
func checkFields(req *api.Request) *api.Error {
	if n := len(req.StopTokenIDs); n > wire.DefaultMaxStopTokens {
		return api.BadRequest("stop_token_ids", fmt.Sprintf("%d stop_token_ids; at most %d are accepted", n, wire.DefaultMaxStopTokens))
	}
	// GENERATE carries these in one frame; the prompt's share is bounded
	// by the prompt limit, the structured-output constraint only here.
	if n := len(req.Guided); n > wire.DefaultMaxFrameSize-4*wire.DefaultMaxTokens-4*wire.DefaultMaxStopTokens-8*wire.DefaultMaxListItems-1024 {
		return api.BadRequest("response_format", fmt.Sprintf("the structured-output constraint is %d bytes, too large to send to an engine", n))
	}
	return nil
}

// fitContext checks the prompt against the context (ctx tokens, 0:
// unknown: contextLength) and the wire, and the output limit against what
// the context leaves.
func fitContext(req *api.Request, promptLen, ctx int) *api.Error {
	if promptLen == 0 {
		return api.BadRequest("prompt", "prompt is empty")
	}
	limit := promptCapOf(ctx)
	if promptLen > limit {
		if ctx > 0 && promptLen >= ctx {
			return api.BadRequest(promptField(req), fmt.Sprintf("this model's maximum context length is %d tokens; the prompt has %d, leaving no room for output", ctx, promptLen))
		}
		return api.BadRequest(promptField(req), fmt.Sprintf("the prompt has %d tokens; at most %d are accepted", promptLen, limit))
	}
	if ctx <= 0 {
		return nil
	}
	room := ctx - promptLen
	if int(req.MaxTokens) <= room {
		return nil
	}
	if !req.MaxTokensGiven {
		req.MaxTokens = uint32(room)
		return nil
	}
	return api.BadRequest("max_tokens", fmt.Sprintf("max_tokens is too large: %d. This model's maximum context length is %d tokens and the prompt has %d (%d > %d - %d)",
		req.MaxTokens, ctx, promptLen, req.MaxTokens, ctx, promptLen))
}

// overPrompt is the answer to a prompt the tokenizer gave up on: it is
// known to hold more than limit tokens.
func (g *Gateway) overPrompt(m *Model, req *api.Request, atLeast int) *api.Error {
	return api.BadRequest(promptField(req), fmt.Sprintf("the prompt has more than %d tokens; at most %d are accepted (context length %d)",
		atLeast, g.promptCap(m, req.Model), g.contextLength(m, req.Model)))
}

func promptField(req *api.Request) string {
	switch req.Kind {
	case api.Completion:
		return "prompt"
	case api.Responses:
		return "input"
	}
	return "messages"
}

// Bounded tokenizing: a text of up to bytesPerTokenBound bytes a token
// of the limit is tokenized whole (bounded work whatever it holds);
// beyond, it is counted window by window, cut at white space, and given
// up on once clearly over the limit, so a 32 MB prompt costs about as
// much to refuse as one just over the limit.
const (
	bytesPerTokenBound = 8
	countWindow        = 64 << 10
	// windowSlack is how many tokens a cut may add or remove: BPE merges
	// never cross the pre-tokenizer's cuts, and a window ends where it
	// cuts, but a cut at a rune start or inside an added token can come
	// out a few tokens apart.
	windowSlack = 8
)

// encodeBounded tokenizes text into dst's room (or room of its own when
// dst has too little), or stops and reports over (with the count so far)
// once text surely has more than limit tokens.
func encodeBounded(dst []uint32, tok *tokenize.Tokenizer, text string, addSpecial bool, limit int) (ids []uint32, over bool, counted int) {
	if len(text) <= bytesPerTokenBound*limit {
		return tok.Encode(idsFor(dst, text), text, addSpecial), false, 0
	}
	var scratch []uint32
	windows := 0
	for pos := 0; pos < len(text); {
		end := cutWindow(text, pos)
		scratch = tok.Encode(scratch[:0], text[pos:end], false)
		counted += len(scratch)
		windows++
		if counted > limit+windowSlack*windows {
			return nil, true, counted - windowSlack*windows
		}
		pos = end
	}
	return tok.Encode(idsFor(dst, text), text, addSpecial), false, 0
}

// idsFor is room for text's ids: dst emptied when it has enough, else
// allocated once: a token holds 3 or more bytes of most text (about 4.5
// of English), where growing from nil allocated 4 times for a 12-token
// prompt.
func idsFor(dst []uint32, text string) []uint32 {
	if n := len(text)/3 + 8; cap(dst) < n {
		return make([]uint32, 0, n)
	}
	return dst[:0]
}

// cutWindow returns the end of the window from pos: about countWindow
// bytes, cut in its second half before a space between two words (where
// the pre-tokenizer cuts too: the next window starts " word" as the word
// does in the whole text), or else at a rune start.
func cutWindow(text string, pos int) int {
	end := pos + countWindow
	if end >= len(text)-1 {
		return len(text)
	}
	for i := end; i > pos+countWindow/2; i-- {
		if text[i] == ' ' && text[i-1] > ' ' && text[i+1] > ' ' {
			return i
		}
	}
	for end > pos+1 && !utf8.RuneStart(text[end]) {
		end--
	}
	return end
}
