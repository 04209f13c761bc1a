package vllm

import (
	"encoding/json"
	"testing"
)

// FuzzLogprobsEntries: whatever logprobs a chunk carries, entries returns
// n entries of topN alternatives each, most likely first, or an error;
// never a panic or a short entry. Seeded with vLLM's CompletionLogProbs as
// it streams them with return_tokens_as_token_ids.
func FuzzLogprobsEntries(f *testing.F) {
	f.Add([]byte(`{"text_offset":[0],"token_logprobs":[-0.31],"tokens":["token_id:12095"],"top_logprobs":[{"token_id:12095":-0.31,"token_id:279":-1.6}]}`), uint8(1), uint8(2))
	f.Add([]byte(`{"token_logprobs":[null,-2],"tokens":["token_id:1","token_id:2"],"top_logprobs":[{"token_id:1":-9999.0},null]}`), uint8(2), uint8(1))
	f.Add([]byte(`{"token_logprobs":[-1],"tokens":[" Paris"],"top_logprobs":[{" Paris":-1}]}`), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, n, topN uint8) {
		var l completionLogprobs
		if json.Unmarshal(raw, &l) != nil {
			return
		}
		entries, err := l.entries(int(n), int(topN)%21)
		if err != nil {
			return
		}
		if len(entries) != int(n) {
			t.Fatalf("%d entries for %d tokens", len(entries), n)
		}
		for _, e := range entries {
			if len(e.Top) != int(topN)%21 {
				t.Fatalf("%d alternatives, want %d", len(e.Top), int(topN)%21)
			}
			for j := 1; j < len(e.Top); j++ {
				if e.Top[j].Logprob > e.Top[j-1].Logprob {
					t.Fatalf("alternatives out of order: %+v", e.Top)
				}
			}
		}
	})
}
