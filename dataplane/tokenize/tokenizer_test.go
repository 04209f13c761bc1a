package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// tinyTokenizer builds a small byte-level tokenizer.json: every byte, a few
// merges, and components given by the caller.
func tinyTokenizer(t testing.TB, mod func(m map[string]any)) *Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	add := func(s string) { vocab[s] = len(vocab) }
	add("he")
	add("ll")
	add("hell")
	add("hello")
	add("Ġh")
	m := map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{map[string]any{"id": 300, "content": "<s>", "special": true}, map[string]any{"id": 301, "content": "[X]", "special": false, "lstrip": true, "rstrip": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "vocab": vocab,
			"merges": []string{"h e", "l l", "he ll", "hell o", "Ġ h"}},
	}
	if mod != nil {
		mod(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTemplatePostProcessorAddsBOS(t *testing.T) {
	tok := tinyTokenizer(t, func(m map[string]any) {
		m["post_processor"] = map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{300}}}}
	})
	if got := tok.Encode(nil, "hello", true); !slices.Equal(got, []uint32{300, 259}) {
		t.Fatalf("with special: %v", got)
	}
	if got := tok.Encode(nil, "hello", false); !slices.Equal(got, []uint32{259}) {
		t.Fatalf("without: %v", got)
	}
}

func TestAddedTokenStrip(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	// [X] strips the spaces around it; <s> is matched inside words.
	got := tok.Encode(nil, "hello  [X]  hello<s>h", false)
	want := []uint32{259, 301, 259, 300, uint32('h')}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if s := tok.DecodeString(got, true); s != "hello[X]hello"+"h" {
		t.Fatalf("decode skipping specials: %q", s)
	}
}

func TestRefusesUnsupported(t *testing.T) {
	cases := map[string]func(m map[string]any){
		"normalizer \"Precompiled\"": func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Precompiled"} },
		"Metaspace prepend_scheme": func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "prepend_scheme": "sometimes"}
		},
		"decoder \"ByteLevel\" without a ByteLevel pre-tokenizer": func(m map[string]any) { m["pre_tokenizer"] = nil },
		"Replace normalizer with a Regex": func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": "_"}
		},
		"pre-tokenizer \"Digits\" after Metaspace": func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Metaspace"}, map[string]any{"type": "Digits"}}}
		},
		"Split regex": func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "behavior": "Isolated", "pattern": map[string]any{"Regex": `a(?=b)`}}
		},
		"behavior \"Removed\"": func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "behavior": "Removed", "pattern": map[string]any{"Regex": `a`}}
		},
		"Unigram model behind a ByteLevel pre-tokenizer": func(m map[string]any) { m["model"].(map[string]any)["type"] = "Unigram" },
		"BPE dropout":           func(m map[string]any) { m["model"].(map[string]any)["dropout"] = 0.1 },
		"truncation":            func(m map[string]any) { m["truncation"] = map[string]any{"max_length": 8} },
		"decoder \"WordPiece\"": func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} },
		"post-processor \"BertProcessing\"": func(m map[string]any) {
			m["post_processor"] = map[string]any{"type": "BertProcessing"}
		},
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			m := map[string]any{}
			tinyTokenizer(t, func(base map[string]any) {
				for k, v := range base {
					m[k] = v
				}
			})
			mod(m)
			b, _ := json.Marshal(m)
			_, err := New(b, nil)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), strings.Trim(strings.Fields(name)[0], "\"")) {
				t.Fatalf("got %v, want ErrUnsupported naming %s", err, name)
			}
		})
	}
	if _, err := New([]byte("{"), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad json: %v", err)
	}
}

// TestStreamHoldsIncompleteUTF8 feeds a string one token at a time where
// tokens split multi-byte characters; the stream never emits a broken
// character and its concatenation equals the whole decode.
func TestStreamHoldsIncompleteUTF8(t *testing.T) {
	tok := builtin(t)
	text := "Emoji 👨‍👩‍👧 and 中文 and é — done 🙏🏽"
	ids := tok.Encode(nil, text, false)
	s := tok.NewStream(true)
	var out []byte
	for _, id := range ids {
		before := len(out)
		out = s.Next(out, []uint32{id})
		if !utf8.Valid(out[before:]) {
			t.Fatalf("emitted invalid UTF-8 %q", out[before:])
		}
	}
	out = s.Flush(out)
	if string(out) != text {
		t.Fatalf("stream gave %q", out)
	}
	// A truncated sequence at the end is flushed as U+FFFD.
	s2 := tok.NewStream(true)
	euro := tok.Encode(nil, "€", false) // one token: bytes E2 82 AC
	b := tok.Decode(nil, euro, true)
	s2.pending = append(s2.pending, b[:2]...)
	if got := string(s2.Next(nil, nil)); got != "" {
		t.Fatalf("incomplete sequence emitted early: %q", got)
	}
	if got := string(s2.Flush(nil)); got != "\uFFFD" {
		t.Fatalf("flush: %q", got)
	}
}

func TestToValidUTF8(t *testing.T) {
	cases := map[string]string{
		"abc":              "abc",
		"a\x80b":           "a\uFFFDb",
		"\xe2\x82 x":       "\uFFFD x",
		"\xc0\xaf":         "\uFFFD\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xf0\x9f\x98":     "\uFFFD",
		"\xf0\x9f\x98\x80": "😀",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xe0\x80\xaf":     "\uFFFD\uFFFD\uFFFD",
	}
	for in, want := range cases {
		if got := toValidUTF8(in); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
}

// TestSegmentCacheIsExact: encoding a conversation turn by turn with the
// segment cache gives the ids of encoding each rendering from scratch.
func TestSegmentCacheIsExact(t *testing.T) {
	tok := builtin(t)
	cold := tok
	var cases []map[string]json.RawMessage
	readJSON(t, "testdata/chat_cases.json", &cases)
	in := chatInputOf(t, cases[len(cases)-1])
	var msgs []json.RawMessage
	if err := json.Unmarshal(in.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	for turn := 1; turn <= len(msgs); turn++ {
		in.Messages, _ = json.Marshal(msgs[:turn])
		warm, _, err := tok.EncodeChat(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := tok.Chat().Render(in)
		if want := cold.encodeUncached(text); !slices.Equal(warm, want) {
			t.Fatalf("turn %d: cached encoding differs", turn)
		}
	}
}

// encodeUncached is Encode without the segment cache.
func (t *Tokenizer) encodeUncached(text string) []uint32 {
	var dst []uint32
	first := true
	for pos := 0; pos < len(text); {
		start, end, tok, ok := t.raw.find(text, pos)
		if !ok {
			return t.encodeNormalized(dst, text[pos:], first, nil)
		}
		dst = t.encodeNormalized(dst, text[pos:start], first, nil)
		dst = append(dst, tok.ID)
		first = false
		pos = end
	}
	return dst
}

func TestEncodeDoesNotAllocate(t *testing.T) {
	tok := builtin(t)
	text := strings.Repeat("The quick brown fox, 1234 times; 東京 🍕\n", 20)
	dst := make([]uint32, 0, 4096)
	dst = tok.Encode(dst[:0], text, false) // warm the caches
	if a := testing.AllocsPerRun(50, func() { dst = tok.Encode(dst[:0], text, false) }); a != 0 {
		t.Fatalf("%v allocs per Encode", a)
	}
	// Without the segment cache: pre-tokenization, the piece cache and BPE.
	raw, err := loadBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	raw.noSegCache = true
	dst = raw.Encode(dst[:0], text, false)
	if a := testing.AllocsPerRun(50, func() { dst = raw.Encode(dst[:0], text, false) }); a != 0 {
		t.Fatalf("%v allocs per uncached Encode", a)
	}
}

// FuzzEncode: any input encodes without panicking, and decoding gives back
// the NFC form of the input with invalid UTF-8 replaced.
func FuzzEncode(f *testing.F) {
	var corpus []corpusItem
	readJSON(f, "testdata/corpus.json", &corpus)
	for _, c := range corpus {
		f.Add(c.input(f))
	}
	tok := builtin(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(nil, s, false)
		got := tok.DecodeString(ids, false)
		if want := norm.NFC.String(toValidUTF8(s)); got != want {
			t.Fatalf("round trip of %q gave %q", s, got)
		}
	})
}

func ExampleTokenizer_Encode() {
	tok, _ := Builtin()
	ids := tok.Encode(nil, "Hello, world!", false)
	fmt.Println(ids, tok.DecodeString(ids, false))
	// Output: [9707 11 1879 0] Hello, world!
}
