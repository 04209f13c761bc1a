package tokenize

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// builtinMerges returns the built-in Qwen3 tokenizer.json's merges as the
// file spells them, one raw JSON value per merge.
func builtinMerges(tb testing.TB) []json.RawMessage {
	tb.Helper()
	gz, err := os.ReadFile("builtin/qwen3/tokenizer.json.gz")
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		tb.Fatal(err)
	}
	var merges []json.RawMessage
	if err := json.Unmarshal(tj.Model.Merges, &merges); err != nil {
		tb.Fatal(err)
	}
	return merges
}

// joinRaw lays raw merges out as tokenizer.json does.
func joinRaw(ms []json.RawMessage) []byte {
	b := []byte("[\n      ")
	for i, m := range ms {
		if i > 0 {
			b = append(b, ",\n      "...)
		}
		b = append(b, m...)
	}
	return append(b, "\n    ]"...)
}

// asLines re-encodes pairs in the older "a b" form, as the tokenizers
// library writes it (UTF-8 as is, no HTML escaping).
func asLines(tb testing.TB, pairs [][2]string) []byte {
	lines := make([]string, len(pairs))
	for i, p := range pairs {
		lines[i] = p[0] + " " + p[1]
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(lines); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// FuzzParseMerges feeds merges in either form. An error is ErrInvalid;
// what parses is one pair per member, each two non-empty strings that the
// input spells (the same pair, or the line "a b"), and it reads back the
// same in both forms (the line form where no first token has a space).
// Seeds are runs of the built-in Qwen3 tokenizer's
// merges, from its start (ASCII and Ġ), its middle and its end (byte-level
// CJK), as the file spells them and re-encoded as "a b" lines, and pairs
// of the wrong size.
func FuzzParseMerges(f *testing.F) {
	ms := builtinMerges(f)
	for _, run := range [][2]int{{0, 40}, {len(ms) / 2, len(ms)/2 + 24}, {len(ms) - 24, len(ms)}} {
		raw := joinRaw(ms[run[0]:run[1]])
		f.Add(raw)
		pairs, err := parseMerges(raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(asLines(f, pairs))
	}
	f.Add([]byte(`[["Ġ","t","he"]]`))
	f.Add([]byte(`[["Ġ"],null]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		pairs, err := parseMerges(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		var members []json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil || members == nil || len(members) != len(pairs) {
			t.Fatalf("%d pairs from %d members (%v)", len(pairs), len(members), err)
		}
		for i, m := range members {
			p := pairs[i]
			if p[0] == "" || p[1] == "" {
				t.Fatalf("merge %d: empty token in %q", i, p)
			}
			var pair []string
			var line string
			switch {
			case json.Unmarshal(m, &pair) == nil:
				if !slices.Equal(pair, p[:]) {
					t.Fatalf("merge %d: %s read as %q", i, m, p)
				}
			case json.Unmarshal(m, &line) == nil:
				if line != p[0]+" "+p[1] || strings.Contains(p[0], " ") {
					t.Fatalf("merge %d: %s read as %q", i, m, p)
				}
			default:
				t.Fatalf("merge %d: %s read as %q", i, m, p)
			}
		}
		asPairs, err := json.Marshal(pairs)
		if err != nil {
			t.Fatal(err)
		}
		forms := [][]byte{asPairs}
		if !slices.ContainsFunc(pairs, func(p [2]string) bool { return strings.Contains(p[0], " ") }) {
			forms = append(forms, asLines(t, pairs)) // a line splits at its first space
		}
		for _, again := range forms {
			back, err := parseMerges(again)
			if err != nil || !slices.Equal(back, pairs) {
				t.Fatalf("re-encoded as %s: %q, %v", again, back, err)
			}
		}
	})
}
