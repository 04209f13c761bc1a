package tokenize

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// nmtNFKC returns SentencePiece's nmt_nfkc charsmap, base64 as in
// tokenizer.json (testdata/precompiled).
func nmtNFKC(t testing.TB) string {
	t.Helper()
	gz, err := os.ReadFile("testdata/precompiled/nmt_nfkc.bin.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// TestPrecompiled checks the trie lookup and the grapheme-wise
// normalization on spm_precompiled's own test vectors (src/tests.rs,
// 3795b14), which come from SentencePiece.
func TestPrecompiled(t *testing.T) {
	cm := nmtNFKC(t)
	p, err := newPrecompiled(&cm)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"\ufb01": "fi", "𝔾": "G", "𝕠": "o", "\u200d": " "} {
		if got, ok := p.transform(in); !ok || got != want {
			t.Errorf("transform(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := p.transform(" "); ok {
		t.Errorf("transform(\" \") = %q, want none", got)
	}
	for in, want := range map[string]string{
		"เขาไม่ได้พูดสักคำ": "เขาไม\u0e48ได\u0e49พ\u0e39ดส\u0e31กค\u0e4dา",
		"ड़ी दुख":                 "ड\u093cी द\u0941ख",
		"\u0627\u0653":            "آ", // one grapheme of two characters, replaced whole
		"plain ascii stays as is": "plain ascii stays as is",
	} {
		if got := p.normalize(in, nil); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
	var a textArena
	if got := p.normalize("ﬁne 𝔾ood", &a); got != "fine Good" {
		t.Errorf("normalize in an arena: %q", got)
	}
	if _, err := New(mustJSON(t, map[string]any{"normalizer": map[string]any{"type": "Precompiled", "precompiled_charsmap": "AAAA"},
		"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{}}}), nil); err == nil {
		t.Error("a charsmap too short for its trie was accepted")
	}
}

// TestPrecompiledTokenizer: a SentencePiece tokenizer with the charsmap
// normalizes before BPE (ﬁ becomes f, i).
func TestPrecompiledTokenizer(t *testing.T) {
	cm := nmtNFKC(t)
	tok := spTokenizer(t, func(m map[string]any) {
		m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Precompiled", "precompiled_charsmap": cm},
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}}
	})
	if got, want := tok.Encode(nil, "\ufb01 𝕒", false), tok.ids(t, "▁", "<0x66>", "i", "▁a"); !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	text := "The 𝔾reat ﬁle, ｆｕｌｌｗｉｄｔｈ"
	dst := tok.Encode(nil, text, false)
	if a := testing.AllocsPerRun(20, func() { dst = tok.Encode(dst[:0], text, false) }); a != 0 && !raceEnabled {
		t.Fatalf("%v allocs per Encode", a)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzPrecompiled: any text normalizes without panicking into valid UTF-8,
// and text the charsmap leaves alone comes back as it was.
func FuzzPrecompiled(f *testing.F) {
	for _, s := range []string{"ﬁne 𝔾ood", "เขาไม่ได้พูดสักคำ", "ड़ी दुख", "\u0627\u0653", "plain", "a\x00b", "\xff\xfe",
		"e\u0301 a\r\nb\t\x01c 🇫🇷🇩🇪 x\u200d", "中\u0301文\r\r\n字\u200d", "\u0600中"} {
		f.Add(s)
	}
	cm := nmtNFKC(f)
	p, err := newPrecompiled(&cm)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = toValidUTF8(s)
		got := p.normalize(s, nil)
		if !utf8.ValidString(got) {
			t.Fatalf("normalize(%q) = %q, not UTF-8", s, got)
		}
		if want := normalizeByClusters(p, s); got != want {
			t.Fatalf("normalize(%q) = %q, cluster by cluster %q", s, got, want)
		}
	})
}

// normalizeByClusters is normalize without loneCluster's shortcut: every
// cluster from uniseg, as tokenizers segments them all.
func normalizeByClusters(p *precompiled, s string) string {
	var out []byte
	state := -1
	for rest := s; rest != ""; {
		var g string
		g, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if norm, ok := p.transform(g); ok && len(g) < 6 {
			out = append(out, norm...)
			continue
		}
		for _, r := range g {
			if norm, ok := p.transform(string(r)); ok {
				out = append(out, norm...)
			} else {
				out = utf8.AppendRune(out, r)
			}
		}
	}
	return string(out)
}

// FuzzSentencePieceDecode: any ids, in the vocabulary or not, decode and
// stream without panicking, into valid UTF-8.
func FuzzSentencePieceDecode(f *testing.F) {
	f.Add([]byte{1, 0, 200, 3, 4, 0xff, 0xff})
	tok, err := LoadDir("testdata/families/llama2")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ids []uint32
		for i := 0; i+1 < len(b); i += 2 {
			ids = append(ids, uint32(b[i])|uint32(b[i+1])<<8)
		}
		if s := tok.DecodeString(ids, b != nil && len(b)%2 == 1); !utf8.ValidString(s) {
			t.Fatalf("decode %v: %q", ids, s)
		}
		st := tok.NewStream(false)
		var out []byte
		for _, id := range ids {
			out = st.Next(out, []uint32{id})
		}
		if out = st.Flush(out); !utf8.Valid(out) {
			t.Fatalf("stream %v: %q", ids, out)
		}
	})
}
