package tokenize

import (
	"slices"
	"testing"
)

func unigramTokenizer(t testing.TB, pieces [][2]any, byteFallback bool) *Tokenizer {
	t.Helper()
	tok, err := New(mustJSON(t, map[string]any{
		"added_tokens": []any{map[string]any{"id": 0, "content": "<unk>", "special": true}},
		"model":        map[string]any{"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": byteFallback},
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestUnigram: tokenizers' own example (Unigram::encode's doc test,
// src/models/unigram/model.rs): the best path, with the two unknown x
// fused into one unknown token; with byte_fallback the run is its bytes.
func TestUnigram(t *testing.T) {
	pieces := [][2]any{{"<unk>", 0.0}, {"a", 0.0}, {"b", 0.0}, {"c", 0.0}, {"d", 0.0},
		{"cd", 1.0}, {"ab", 2.0}, {"abc", 5.0}, {"abcd", 10.0}}
	tok := unigramTokenizer(t, pieces, false)
	if got, want := tok.Encode(nil, "abcdacdxx", false), []uint32{8, 1, 5, 0}; !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	withBytes := append(slices.Clone(pieces), [2]any{"<0x78>", -1.0})
	tok = unigramTokenizer(t, withBytes, true)
	if got, want := tok.Encode(nil, "abcdacdxx", false), []uint32{8, 1, 5, 9, 9}; !slices.Equal(got, want) {
		t.Fatalf("byte fallback: got %v want %v", got, want)
	}
	// Equal scores: the path that reached a position first stays ("aa"
	// from position 0 before "a" from position 1).
	tok = unigramTokenizer(t, [][2]any{{"<unk>", 0.0}, {"a", -1.0}, {"aa", -2.0}, {"b", -1.0}}, false)
	if got, want := tok.Encode(nil, "aab", false), []uint32{2, 3}; !slices.Equal(got, want) {
		t.Fatalf("tie: got %v want %v", got, want)
	}
}

// TestPieceTrieWideNodes: a node with more children than the linear scan
// takes, added out of order, is searched by halves once built.
func TestPieceTrieWideNodes(t *testing.T) {
	var tr pieceTrie
	var pieces []string
	for c := byte('z'); c >= 'a'; c-- { // added out of byte order
		pieces = append(pieces, "x"+string(c), "x"+string(c)+"y")
	}
	for i, p := range pieces {
		tr.add(p, uint32(i))
	}
	tr.finish()
	for i, p := range pieces {
		n := int32(0)
		for k := 0; k < len(p) && n >= 0; k++ {
			n = tr.child(n, p[k])
		}
		if n < 0 || tr.nodes[n].id != uint32(i) {
			t.Fatalf("%q: node %d", p, n)
		}
	}
	if tr.child(tr.child(0, 'x'), '{') >= 0 {
		t.Fatal("found a child that was never added")
	}
}
