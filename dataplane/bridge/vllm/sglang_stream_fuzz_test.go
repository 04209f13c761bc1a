package vllm

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// generateStreams are /generate streams as SGLang writes them (orjson, no
// spaces; see sglang_api.go for the source): every id so far in each
// chunk, only the new ones (--incremental-streaming-output), an error
// event before [DONE], an abort with a status code, a stream cut short.
var generateStreams = map[string]string{
	"cumulative": `data: {"text":" Paris","output_ids":[12095],"meta_info":{"id":"9f1c","finish_reason":null,"prompt_tokens":5,"weight_version":"default","num_retractions":0,"reasoning_tokens":0,"completion_tokens":1,"cached_tokens":0}}

data: {"text":" Paris.","output_ids":[12095,13],"meta_info":{"id":"9f1c","finish_reason":null,"prompt_tokens":5,"weight_version":"default","num_retractions":0,"reasoning_tokens":0,"completion_tokens":2,"cached_tokens":0}}

data: {"text":" Paris. The","output_ids":[12095,13,576],"meta_info":{"id":"9f1c","finish_reason":{"type":"length","length":3},"prompt_tokens":5,"weight_version":"default","num_retractions":0,"reasoning_tokens":0,"completion_tokens":3,"cached_tokens":0,"e2e_latency":0.042}}

data: [DONE]

`,
	"incremental": `data: {"text":"Hello! How","output_ids":[9707,0,2585],"meta_info":{"id":"1f","finish_reason":null,"prompt_tokens":5,"completion_tokens":3,"cached_tokens":4}}

data: {"text":"","output_ids":[151645],"meta_info":{"id":"1f","finish_reason":{"type":"stop","matched":151645},"prompt_tokens":5,"completion_tokens":4,"cached_tokens":4}}

data: [DONE]

`,
	"error": `data: {"error":{"message":"The input (40961 tokens) is longer than the model's context length (40960 tokens)."}}

data: [DONE]

`,
	"abort": `data: {"text":" a","output_ids":[264],"meta_info":{"id":"3b","finish_reason":null,"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0}}

data: {"text":" a","output_ids":[264],"meta_info":{"id":"3b","finish_reason":{"type":"abort","message":"Abort before prefill","status_code":503},"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0}}

data: [DONE]

`,
	"cut": `data: {"text":" a","output_ids":[264],"meta_info":{"id":"3b","finish_reason":null,"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0}}

data: {"text":" a b","output_ids":[264,`,
}

// generateRun is what relaying one /generate stream gave.
type generateRun struct {
	end     sseEnd
	err     string
	ids     []uint32
	relayed uint32
	reason  string
}

func runGenerate(t *testing.T, b []byte, piece bool) generateRun {
	var s generateRelay
	var out generateRun
	var rd io.Reader = bytes.NewReader(b)
	if piece {
		rd = iotest.OneByteReader(rd)
	}
	end, err := decodeSSE(rd, func(c *genChunk) error {
		before := s.relayed
		ids, err := s.newIDs(c)
		if err == nil && s.relayed != before+uint32(len(ids)) {
			t.Fatalf("%d ids relayed after %d, with %d new", s.relayed, before, len(ids))
		}
		out.ids = append(out.ids, ids...)
		return err
	})
	out.end, out.relayed, out.reason = end, s.relayed, s.reason
	if err != nil {
		out.err = err.Error()
	}
	return out
}

// TestGenerateStreams: each of SGLang's streams relays its ids once each,
// in order, and ends as it should.
func TestGenerateStreams(t *testing.T) {
	for name, want := range map[string]generateRun{
		"cumulative":  {end: sseDone, ids: []uint32{12095, 13, 576}, relayed: 3, reason: "length"},
		"incremental": {end: sseDone, ids: []uint32{9707, 0, 2585, 151645}, relayed: 4, reason: "stop"},
		"error":       {end: sseEngineError, err: "The input (40961 tokens) is longer than the model's context length (40960 tokens)."},
		"abort":       {end: sseRefused, ids: []uint32{264}, relayed: 1, err: "SGLang aborted the request (503): Abort before prefill"},
		"cut":         {end: sseCut, ids: []uint32{264}, relayed: 1, err: "unexpected EOF"},
	} {
		got := runGenerate(t, []byte(generateStreams[name]), false)
		if got.end != want.end || got.err != want.err || !slices.Equal(got.ids, want.ids) || got.relayed != want.relayed || got.reason != want.reason {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}

// FuzzGenerateStream feeds arbitrary /generate streams: the relay never
// panics, never hands over more ids than it counts as relayed (each id
// once), and reads a stream arriving a byte at a time as it reads it
// whole.
func FuzzGenerateStream(f *testing.F) {
	for _, s := range generateStreams {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		whole := runGenerate(t, b, false)
		if uint32(len(whole.ids)) != whole.relayed {
			t.Fatalf("%d ids handed over, %d counted", len(whole.ids), whole.relayed)
		}
		if bytewise := runGenerate(t, b, true); bytewise.end != whole.end || !slices.Equal(bytewise.ids, whole.ids) {
			t.Fatalf("a byte at a time: %+v; whole: %+v", bytewise, whole)
		}
	})
}
