package tokenize

import (
	"fmt"
	"testing"
)

func TestVocabTable(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		want := map[string]uint32{}
		for i := range n {
			want[fmt.Sprintf("tok%d", i*7)] = uint32(i)
		}
		if n > 0 {
			want[""] = uint32(n) // an empty spelling is a key like any other
		}
		tab := newVocabTable(want)
		if tab.Len() != len(want) {
			t.Fatalf("n=%d: Len %d, want %d", n, tab.Len(), len(want))
		}
		for s, id := range want {
			if got, ok := tab.get(s); !ok || got != id {
				t.Fatalf("n=%d: get(%q) = %d, %v; want %d", n, s, got, ok, id)
			}
			if got, ok := tab.getBytes([]byte(s)); !ok || got != id {
				t.Fatalf("n=%d: getBytes(%q) = %d, %v; want %d", n, s, got, ok, id)
			}
		}
		for _, miss := range []string{"tok1", "tok7x", "to", "tok70000"} {
			if _, inWant := want[miss]; inWant {
				continue
			}
			if id, ok := tab.get(miss); ok {
				t.Fatalf("n=%d: get(%q) = %d, want none", n, miss, id)
			}
		}
		seen := map[string]uint32{}
		for s, id := range tab.all() {
			seen[s] = id
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("n=%d: all() yields %d spellings, not the vocabulary's %d", n, len(seen), len(want))
		}
	}
}

// TestBuiltinVocab holds the built-in tokenizer's table equal to its
// tokenizer.json vocabulary and its spellings to the bytes they decode to.
func TestBuiltinVocab(t *testing.T) {
	tok, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if tok.vocab.Len() < 100000 {
		t.Fatalf("built-in vocabulary of %d spellings", tok.vocab.Len())
	}
	for s, id := range tok.vocab.all() {
		if got, ok := tok.VocabID(s); !ok || got != id {
			t.Fatalf("VocabID(%q) = %d, %v; want %d", s, got, ok, id)
		}
		raw, ok := appendRawBytes(nil, s)
		if ok && string(tok.spelling[id]) != string(raw) {
			t.Fatalf("spelling of %d is %q, want %q", id, tok.spelling[id], raw)
		}
		if sp := tok.spelling[id]; cap(sp) != len(sp) {
			t.Fatalf("spelling of %d has room past it (%d > %d): an append would write over the next", id, cap(sp), len(sp))
		}
	}
}

// BenchmarkVocabGet looks up every 97th spelling of the built-in
// vocabulary in its table and, side by side, in a map of the same.
func BenchmarkVocabGet(b *testing.B) {
	tok, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]uint32{}
	var keys []string
	i := 0
	for s, id := range tok.vocab.all() {
		s = string([]byte(s))
		m[s] = id
		if i%97 == 0 {
			keys = append(keys, s)
		}
		i++
	}
	b.Run("table", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := tok.vocab.get(keys[i%len(keys)]); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := m[keys[i%len(keys)]]; !ok {
				b.Fatal("missing")
			}
		}
	})
}
