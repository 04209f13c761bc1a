package api

import (
	"runtime"
	"testing"
)

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

// TestDecodeChatBodyStaysOnStack: decoding a short chat allocates what the
// request keeps, not the body struct (over 800 B) it is read into, which
// went to the heap for the address of its image sink (1,552 B a chat
// then, 688 after).
func TestDecodeChatBodyStaysOnStack(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Hello, how are you today?"}],"max_tokens":16}`)
	decode := func() {
		if _, e := DecodeChat(body, nil); e != nil {
			t.Fatal(e)
		}
	}
	decode() // warm
	const runs = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		decode()
	}
	runtime.ReadMemStats(&after)
	if n := (after.TotalAlloc - before.TotalAlloc) / runs; n > 1024 {
		t.Fatalf("decoding a short chat allocates %d B, want at most 1024", n)
	}
}
