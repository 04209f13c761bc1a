package media

import (
	"errors"
	"slices"
	"testing"
)

// testVocab gives special tokens ids from 1000 on and encodes text one
// id per byte.
type testVocab map[string]uint32

func (v testVocab) Token(s string) (uint32, bool) { id, ok := v[s]; return id, ok }
func (testVocab) Encode(text string) []uint32 {
	ids := make([]uint32, len(text))
	for i := range text {
		ids[i] = uint32(text[i])
	}
	return ids
}

func TestPlace(t *testing.T) {
	v := testVocab{"<|image_pad|>": 1001, "<start_of_image>": 1002, "<image_soft_token>": 1003, "<end_of_image>": 1004}
	qwen, _ := NewProcessor("qwen2-vl", ProcessorOptions{})
	small, _ := qwen.Expand(56, 56) // 4 tokens
	big, _ := qwen.Expand(448, 448) // 256 tokens
	ids := []uint32{1, 2, 1001, 3, 1001, 4}
	out, ranges, err := Place(ids, 1001, []Expansion{small, big}, v)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{2, 4}, {7, 256}}; !slices.Equal(ranges, want) {
		t.Fatalf("ranges %v, want %v", ranges, want)
	}
	if len(out) != 4+4+256 || out[1] != 2 || out[6] != 3 || out[len(out)-1] != 4 || out[2] != 1001 || out[262] != 1001 {
		t.Fatalf("ids %v", out)
	}

	gemma, _ := NewProcessor("gemma3", ProcessorOptions{})
	e, _ := gemma.Expand(10, 10)
	out, ranges, err = Place([]uint32{7, 1002, 8}, 1002, []Expansion{e}, v)
	// "\n\n" (2 ids) + boi + 256 soft + eoi + "\n\n" (2 ids) = 262 tokens from offset 1
	if err != nil || !slices.Equal(ranges, []Range{{1, 262}}) || out[1] != '\n' || out[3] != 1002 || out[4] != 1003 || out[260] != 1004 || out[263] != 8 {
		t.Fatalf("gemma: %v, %v", ranges, err)
	}

	for _, bad := range [][]uint32{{1001}, {1001, 1001, 1001}, {1, 2}} {
		if _, _, err := Place(bad, 1001, []Expansion{small, big}, v); !errors.Is(err, ErrPlacement) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, _, err := Place([]uint32{1001}, 1001, []Expansion{small}, testVocab{}); !errors.Is(err, ErrNoProcessor) {
		t.Errorf("missing vocabulary token: %v", err)
	}
}

// newlineVocab is testVocab where runs of one to four newlines are
// single tokens (2001..2004), as in Gemma 3's vocabulary.
type newlineVocab struct{ testVocab }

func (v newlineVocab) Encode(text string) []uint32 {
	if n := len(text); n >= 1 && n <= 4 && text == "\n\n\n\n"[:n] {
		return []uint32{uint32(2000 + n)}
	}
	return v.testVocab.Encode(text)
}

// Gemma 3's blank lines around an image merge with the prompt's own
// newlines as its tokenizer would have tokenized them together (vLLM's
// _apply_token_matches), the ranges starting at the merged token.
func TestGemmaMergeTokens(t *testing.T) {
	v := newlineVocab{testVocab{"<start_of_image>": 1002, "<image_soft_token>": 1003, "<end_of_image>": 1004}}
	gemma, _ := NewProcessor("gemma3", ProcessorOptions{})
	e, _ := gemma.Expand(10, 10)
	const n1, n2, n3, n4 = 2001, 2002, 2003, 2004
	// "x\n\n" <image> "\n" <image> "y": the first image's leading "\n\n"
	// meets the prompt's "\n\n"; its trailing one meets "\n", and that
	// one the second image's leading "\n\n".
	ids := []uint32{'x', n2, 1002, n1, 1002, 'y'}
	placed, ranges, err := Place(ids, 1002, []Expansion{e, e}, v)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{2, 260}, {263, 260}}; !slices.Equal(ranges, want) {
		t.Fatalf("placed ranges %v, want %v", ranges, want)
	}
	out, merged := gemma.(TokenMerger).MergeTokens(placed, ranges, v)
	// Pass 1 ("\n" "\n\n"): the "\n" before image 2 and its leading
	// "\n\n" -> "\n\n\n"; pass 2 ("\n\n" "\n") finds none left; pass 3
	// ("\n\n" "\n\n"): the prompt's and image 1's -> "\n\n\n\n".
	image := func() []uint32 {
		return slices.Concat([]uint32{1002}, slices.Repeat([]uint32{1003}, 256), []uint32{1004})
	}
	want := slices.Concat([]uint32{'x', n4}, image(), []uint32{n2, n3}, image(), []uint32{n2, 'y'})
	if !slices.Equal(out, want) {
		t.Fatalf("merged ids differ:\n got %v\nwant %v", out[:4], want[:4])
	}
	if wantR := []Range{{1, 260}, {261, 260}}; !slices.Equal(merged, wantR) {
		t.Fatalf("merged ranges %v, want %v", merged, wantR)
	}
	// A vocabulary without single newline tokens is left as it is.
	if same, r := gemma.(TokenMerger).MergeTokens(placed, ranges, v.testVocab); !slices.Equal(same, placed) || !slices.Equal(r, ranges) {
		t.Fatal("merged without newline tokens")
	}
	if _, ok := Processor(qwenProcessor(t)).(TokenMerger); ok {
		t.Fatal("Qwen's expansions have no text to merge")
	}
}

func qwenProcessor(t *testing.T) Processor {
	t.Helper()
	p, err := NewProcessor("qwen2-vl", ProcessorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
