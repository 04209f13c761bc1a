package tokenize

import (
	"math/rand/v2"
	"testing"
)

// TestStreamReset: a stream Reset in the middle of a character (bytes
// held back) or of a SentencePiece prefix gives what a new stream gives,
// with the new skipSpecial setting.
func TestStreamReset(t *testing.T) {
	bl := builtin(t)
	sp := spTokenizer(t, nil)
	cases := []struct {
		name     string
		tok      *Tokenizer
		before   []uint32 // fed before Reset and left unflushed
		ids      []uint32
		skipThen bool
	}{
		{"byte-level", bl, bl.Encode(nil, "caf\u00e9 \u2603", false)[:2], randomIDs(bl, 40), true},
		{"byte-level special kept", bl, randomIDs(bl, 9), append(randomIDs(bl, 20), uint32(bl.VocabSize()-1)), false},
		{"sentencepiece", sp, sp.ids(t, "\u2581hi", "<0xE2>", "<0x82>"), sp.ids(t, "\u2581a", "b", "<0xE2>", "<0x82>", "<0xAC>", "\u2581hi"), false},
	}
	for _, c := range cases {
		used := c.tok.NewStream(!c.skipThen)
		used.Next(nil, c.before)
		used.Reset(c.tok, c.skipThen)
		fresh := c.tok.NewStream(c.skipThen)
		for i := range c.ids {
			got, want := string(used.Next(nil, c.ids[i:i+1])), string(fresh.Next(nil, c.ids[i:i+1]))
			if got != want {
				t.Fatalf("%s: id %d gave %q after Reset, %q from a new stream", c.name, i, got, want)
			}
		}
		if got, want := string(used.Flush(nil)), string(fresh.Flush(nil)); got != want {
			t.Fatalf("%s: flush %q after Reset, %q from a new stream", c.name, got, want)
		}
	}
}

// randomIDs are n ids drawn from tok's vocabulary, special ones included.
func randomIDs(tok *Tokenizer, n int) []uint32 {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(rng.IntN(tok.VocabSize()))
	}
	return ids
}
