package api

import "testing"

// TestDecodeCompletionAllocs holds decoding proxybench's body to what the
// request keeps: the Request, its model and prompt strings and max_tokens
// (a *int64 field read as encoding/json reads it). Extras on the heap for
// a json.Unmarshal of logprobs and the prompt's fallback variables were 2
// more.
func TestDecodeCompletionAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	body := []byte(benchBody)
	n := testing.AllocsPerRun(200, func() {
		if _, e := DecodeCompletion(body, nil); e != nil {
			t.Fatal(e)
		}
	})
	if n > 4 {
		t.Fatalf("%v allocations decoding proxybench's body, want at most 4", n)
	}
}
