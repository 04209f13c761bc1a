package vllm

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// TestFirstDrop: the decode side's first vLLM token is dropped with its
// text and logprobs also when it shares a chunk with later tokens (vLLM's
// stream_interval, speculative decoding), the chunk then relayed as the
// later tokens alone; a first token other than the prefill's stops the
// stream before any frame.
func TestFirstDrop(t *testing.T) {
	const data = `{"choices":[{"text":"<7><8>","token_ids":[7,8],"finish_reason":null,
		"logprobs":{"tokens":["token_id:7","token_id:8"],"token_logprobs":[-0.5,-0.25],
		"top_logprobs":[{"token_id:7":-0.5},{"token_id:8":-0.25}]}}]}`
	e := &Engine{Out: serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "d"}}, nil)}
	for _, c := range []struct {
		want uint32
		err  error
		left []uint32
	}{
		{7, nil, []uint32{8}},
		{6, errFirstMismatch, []uint32{7, 8}},
	} {
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		s := relay{e: e, topN: 0}
		d := firstDrop{relay: &s, want: c.want}
		err := d.chunk(&ch)
		got := ch.Choices[0]
		if !errors.Is(err, c.err) || !slices.Equal(got.TokenIDs, c.left) || len(got.Logprobs.TokenLogprobs) != len(c.left) ||
			len(got.Logprobs.TopLogprobs) != len(c.left) || d.got != 7 {
			t.Fatalf("want %d: %v, left %v, logprobs %+v", c.want, err, got.TokenIDs, got.Logprobs)
		}
		if c.err == nil && (!s.sentFirst || *got.Logprobs.TokenLogprobs[0] != -0.25) {
			t.Fatalf("want %d: relayed %v, logprobs %v", c.want, s.sentFirst, got.Logprobs.TokenLogprobs)
		}
	}
}
