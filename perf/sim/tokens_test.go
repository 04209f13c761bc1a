package sim

import (
	"slices"
	"testing"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// TestFrameBuilder: a batching router's stream gets one frame for all its
// outputs of a batch (first and last facts, usage and logprobs kept),
// another router's one frame per output, as before wire.FeatureTokenBatch.
func TestFrameBuilder(t *testing.T) {
	a := RequestKey{Conn: 1, Stream: 1} // conn 1 batches
	b := RequestKey{Conn: 1, Stream: 3}
	c := RequestKey{Conn: 2, Stream: 1} // conn 2 does not
	lp := func(v float32) wire.LogprobEntry {
		return wire.LogprobEntry{Logprob: v, Top: []wire.Alt{{Token: 1, Logprob: v}}}
	}
	outs := []Output{
		{Key: a, Token: 10, HasToken: true, First: true, Cached: 16, Logprob: lp(-1), HasLogprob: true},
		{Key: b, Token: 20, HasToken: true},
		{Key: c, Token: 30, HasToken: true, First: true},
		{Key: a, Token: 11, HasToken: true, Logprob: lp(-2), HasLogprob: true},
		{Key: c, Token: 31, HasToken: true},
		{Key: b, Token: 21, HasToken: true, Finish: wire.FinishLength, PromptTokens: 5, CompletionTokens: 9},
		{Key: a, Token: 12, HasToken: true, Logprob: lp(-3), HasLogprob: true},
		{Key: a, Finish: wire.FinishCancelled, PromptTokens: 4, CompletionTokens: 3}, // CANCEL's end, no token
	}
	var fb frameBuilder
	for round := range 2 { // the second reuses the arrays
		frames := fb.frames(outs, func(conn uint64) bool { return conn == 1 })
		type want struct {
			key    RequestKey
			ids    []uint32
			flags  wire.TokensFlags
			finish wire.FinishReason
			usage  [2]uint32
		}
		wants := []want{
			{a, []uint32{10, 11, 12}, wire.TokFirst | wire.TokLast | wire.TokLogprobs, wire.FinishCancelled, [2]uint32{4, 3}},
			{b, []uint32{20, 21}, wire.TokLast, wire.FinishLength, [2]uint32{5, 9}},
			{c, []uint32{30}, wire.TokFirst, 0, [2]uint32{}},
			{c, []uint32{31}, 0, 0, [2]uint32{}},
		}
		if len(frames) != len(wants) {
			t.Fatalf("round %d: %d frames, want %d", round, len(frames), len(wants))
		}
		for i, w := range wants {
			m := &frames[i].Msg
			if frames[i].Key != serve.Key(w.key) || !slices.Equal(m.Tokens.AppendTo(nil), w.ids) || m.Flags != w.flags ||
				m.Finish != w.finish || m.PromptTokens != w.usage[0] || m.CompletionTokens != w.usage[1] {
				t.Fatalf("round %d frame %d: %+v %v, want %+v", round, i, frames[i].Key, m.Tokens.AppendTo(nil), w)
			}
		}
		if m := frames[0].Msg; m.CachedTokens != 16 || m.Logprobs.Len() != 3 || m.Logprobs.Logprob(2) != -3 {
			t.Fatalf("round %d: first frame cached %d, logprobs %v", round, m.CachedTokens, m.Logprobs.Entries())
		}
		if _, err := frames[0].Msg.AppendPayload(nil); err != nil { // one logprob per token: it encodes
			t.Fatal(err)
		}
	}
}
