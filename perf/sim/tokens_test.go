package sim

import (
	"context"
	"slices"
	"testing"
	"time"

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
		batches := func(conn uint64) bool { return conn == 1 }
		var frames []serve.Tokens
		for _, want := range []bool{true, false} { // each call reuses the arrays: copy the ids out
			for _, f := range fb.frames(outs, batches, want) {
				f.Msg.Tokens = wire.TokensOf(f.Msg.Tokens.AppendTo(nil))
				frames = append(frames, f)
			}
		}
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

// TestServerTokenBatch: the same requests from a router that takes
// batched frames and from one that does not get the same ids and usage;
// only the second is held to one token a frame.
func TestServerTokenBatch(t *testing.T) {
	const streams, maxTokens = 48, 300
	got := map[bool][][]uint32{}
	for _, batch := range []bool{false, true} {
		_, addr := startServer(t, func(c *Config) { c.Rank.GPUBlocks = 4096 })
		var f wire.Feature
		if batch {
			f = wire.FeatureTokenBatch
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r", Features: f}}, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.NetConn.SetReadDeadline(time.Now().Add(60 * time.Second))
		if c.Peer.Features&wire.FeatureTokenBatch == 0 {
			t.Fatal("the WELCOME lacks FeatureTokenBatch")
		}
		for i := range streams {
			g := generate([]uint32{1, 2, uint32(3 + i)}, maxTokens)
			g.Flags |= wire.GenHasSeed
			g.Seed = uint64(i)
			must(t, c.Send(uint32(i+1), g))
		}
		ids := make([][]uint32, streams)
		frames, open := 0, streams
		for open > 0 {
			fr, err := c.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if fr.Type != wire.TypeTokens {
				continue
			}
			var m wire.TokensMsg
			must(t, wire.DecodeFrame(fr, &m, nil))
			s := int(fr.Stream) - 1
			if m.First() != (len(ids[s]) == 0) {
				t.Fatalf("stream %d: FIRST on a frame after %d tokens", s, len(ids[s]))
			}
			if !batch && m.Tokens.Len() != 1 {
				t.Fatalf("a router without FeatureTokenBatch got %d tokens in a frame", m.Tokens.Len())
			}
			ids[s] = m.Tokens.AppendTo(ids[s])
			frames++
			if m.Last() {
				open--
				if m.CompletionTokens != maxTokens || len(ids[s]) != maxTokens || m.Finish != wire.FinishLength {
					t.Fatalf("stream %d: %d ids, usage %d, finish %s", s, len(ids[s]), m.CompletionTokens, m.Finish)
				}
			}
		}
		t.Logf("batch %v: %d tokens in %d frames", batch, streams*maxTokens, frames)
		got[batch] = ids
	}
	for s := range streams {
		if !slices.Equal(got[false][s], got[true][s]) {
			t.Fatalf("stream %d: batched ids differ", s)
		}
	}
}
