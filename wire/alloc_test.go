package wire

import (
	"bytes"
	"testing"
)

func longPrompt(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i * 2654435761)
	}
	return ids
}

// TestDecodeHotPathsDoNotAllocate: GENERATE and TOKENS decode as views, and a
// warmed KVEvents decodes into its own capacity.
func TestDecodeHotPathsDoNotAllocate(t *testing.T) {
	gen := &Generate{RequestID: []byte("r"), Model: []byte("m"), TopP: 1, StopTokens: TokensOf([]uint32{1}),
		Prompt: TokensOf(longPrompt(8192))}
	tok := &TokensMsg{Flags: TokFirst, Tokens: TokensOf([]uint32{1, 2, 3}), Text: []byte("abc")}
	ev := &KVEvents{Events: []Event{{Kind: EventStored, Hashes: HashesOf(make([]uint64, 64))},
		{Kind: EventRemoved, Hashes: HashesOf(make([]uint64, 8))}}}
	// With the sampling and logprobs sections (FeatureSampling) too.
	sampled := *gen
	sampled.Flags |= GenSampling
	sampled.Sampling = Sampling{RepetitionPenalty: 1, Flags: SampleLogprobs, TopLogprobs: 2,
		LogitBias: LogitBiasOf([]uint32{7, 9}, []float32{1, -1})}
	lps, _ := LogprobsOf(2, []LogprobEntry{{-1, []Alt{{1, -1}, {2, -2}}}, {-1, []Alt{{2, -1}, {3, -2}}}, {-1, []Alt{{3, -1}, {4, -2}}}})
	withLP := &TokensMsg{Flags: TokLogprobs, Tokens: TokensOf([]uint32{1, 2, 3}), Logprobs: lps}
	for _, m := range []Message{gen, tok, ev, &sampled, withLP} {
		payload, err := m.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		into := NewMessage(m.Type())
		if err := into.Decode(payload, nil); err != nil { // warm up
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := into.Decode(payload, nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("decoding %s: %v allocs per run, want 0", m.Type(), allocs)
		}
	}
}

// TestReaderSteadyStateDoesNotAllocate: reading frames from a warm reader is
// allocation-free, so the engine-facing read loop makes no garbage.
func TestReaderSteadyStateDoesNotAllocate(t *testing.T) {
	frame, err := AppendFrame(nil, 3, &TokensMsg{Tokens: TokensOf([]uint32{1, 2})})
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat(frame, 1000)
	rd := bytes.NewReader(src)
	r := NewReader(rd, nil)
	var m TokensMsg
	allocs := testing.AllocsPerRun(500, func() {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Decode(f.Payload, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per frame, want 0", allocs)
	}
}

// TestEncodeIntoCapacityDoesNotAllocate: a router encoding GENERATE into a
// reused buffer makes no garbage.
func TestEncodeIntoCapacityDoesNotAllocate(t *testing.T) {
	gen := &Generate{Model: []byte("m"), TopP: 1, Prompt: TokensOf(longPrompt(8192))}
	buf := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendFrame(buf[:0], 1, gen); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per encode, want 0", allocs)
	}
}
