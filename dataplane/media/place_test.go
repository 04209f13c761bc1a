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
