package vllm

import (
	"fmt"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// genChunk is one chunk of SGLang's /generate stream (the fields the
// bridge reads; see sglang_api.go).
type genChunk struct {
	OutputIDs []uint32 `json:"output_ids"`
	MetaInfo  *struct {
		FinishReason *struct {
			Type       string `json:"type"`
			Message    string `json:"message"`
			StatusCode int    `json:"status_code"`
		} `json:"finish_reason"`
		PromptTokens     uint32 `json:"prompt_tokens"`
		CompletionTokens uint32 `json:"completion_tokens"`
		CachedTokens     uint32 `json:"cached_tokens"`
	} `json:"meta_info"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (c *genChunk) engineError() (string, bool) {
	if c.Error == nil {
		return "", false
	}
	return c.Error.Message, true
}

// generateRelay turns /generate chunks into TOKENS frames. relayed is how
// many ids it has sent: a chunk's output_ids are every id so far when
// there are completion_tokens of them, the new ones when relayed plus
// theirs make completion_tokens (--incremental-streaming-output). The
// two readings agree on a first chunk and on no other, and a chunk that
// fits neither (ids lost, or counted twice) fails the stream rather than
// give the router a wrong continuation.
type generateRelay struct {
	relay
	relayed uint32
}

func (s *generateRelay) chunk(c *genChunk) error {
	ids, err := s.newIDs(c)
	if err != nil || len(ids) == 0 {
		return err
	}
	t := wire.TokensMsg{Tokens: wire.TokensOf(ids)}
	if !s.sentFirst {
		t.Flags, t.CachedTokens, s.sentFirst = wire.TokFirst, s.cached, true
	}
	s.e.Out.Deliver([]serve.Tokens{{Key: s.k, Msg: t}})
	return nil
}

// newIDs takes in chunk c's usage and finish reason and returns the ids
// it adds to those relayed.
func (s *generateRelay) newIDs(c *genChunk) ([]uint32, error) {
	m := c.MetaInfo
	if m == nil {
		return nil, fmt.Errorf("SGLang sent a chunk without meta_info")
	}
	if f := m.FinishReason; f != nil {
		if f.Type == "abort" && f.StatusCode >= 400 {
			return nil, fmt.Errorf("SGLang aborted the request (%d): %s", f.StatusCode, f.Message)
		}
		s.reason = f.Type
	}
	s.prompt, s.completion, s.cached = m.PromptTokens, m.CompletionTokens, m.CachedTokens
	n, ids := m.CompletionTokens, c.OutputIDs
	switch {
	case uint32(len(ids)) == n && n >= s.relayed: // every id so far
		ids = ids[s.relayed:]
	case s.relayed+uint32(len(ids)) == n: // the new ones
	default:
		return nil, fmt.Errorf("SGLang sent %d output ids at %d completion tokens after %d relayed: neither all ids so far nor the new ones",
			len(ids), n, s.relayed)
	}
	s.relayed = n
	return ids, nil
}
