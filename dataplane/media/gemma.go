package media

// gemma3 is Gemma 3's processor: every image is 256 tokens whatever its
// size (the SigLIP encoder sees it at 896x896), pan-and-scan being off
// by default. The chat template writes <start_of_image> (the tokenizer's
// boi_token) for an image; the processor replaces it with "\n\n",
// <start_of_image>, 256 <image_soft_token>, <end_of_image> (eoi_token),
// "\n\n" (transformers src/transformers/models/gemma3/processing_gemma3.py,
// image_seq_length = 256 and full_image_sequence, commit
// 015bfeb86891c5f5e450f48942260ac3e2cd2bf2).
type gemma3 struct{}

const gemma3ImageTokens = 256

func (gemma3) Name() string   { return "gemma3" }
func (gemma3) Marker() string { return "<start_of_image>" }

func (gemma3) Expand(width, height int) (Expansion, error) {
	return Expansion{Runs: []Run{
		{Token: "\n\n", Count: 1, Text: true},
		{Token: "<start_of_image>", Count: 1},
		{Token: "<image_soft_token>", Count: gemma3ImageTokens},
		{Token: "<end_of_image>", Count: 1},
		{Token: "\n\n", Count: 1, Text: true},
	}, Features: gemma3ImageTokens}, nil
}

// MergeTokens merges, after placement, the newline tokens the
// expansions' "\n\n" runs put next to the prompt's own, as Gemma 3's
// tokenizer would have tokenized them together ("\n\n\n" and
// "\n\n\n\n" are single tokens) and as vLLM does after its token-space
// replacement (vllm/model_executor/models/gemma3_mm.py,
// Gemma3MultiModalProcessor._apply_token_matches, commit
// 0004c540861d3e59a7c1b3860f594aa8b24293db: "\n" "\n\n" and "\n\n" "\n"
// become "\n\n\n", then "\n\n" "\n\n" becomes "\n\n\n\n", each pass left
// to right). Each range then starts at the token its first token went
// into and keeps its length, as _find_mm_placeholders there counts it.
// A vocabulary without those single tokens is left as it is.
func (gemma3) MergeTokens(ids []uint32, ranges []Range, v Vocab) ([]uint32, []Range) {
	var nl [5]uint32
	for n := 1; n <= 4; n++ {
		e := v.Encode("\n\n\n\n"[:n])
		if len(e) != 1 {
			return ids, ranges
		}
		nl[n] = e[0]
	}
	pos := make([]int, len(ids)) // where ids[i] is now
	for i := range pos {
		pos[i] = i
	}
	for _, rule := range [][3]uint32{{nl[1], nl[2], nl[3]}, {nl[2], nl[1], nl[3]}, {nl[2], nl[2], nl[4]}} {
		out := make([]uint32, 0, len(ids))
		moved := make([]int, len(ids))
		for i := 0; i < len(ids); i++ {
			moved[i] = len(out)
			if i+1 < len(ids) && ids[i] == rule[0] && ids[i+1] == rule[1] {
				i++
				moved[i] = len(out)
				out = append(out, rule[2])
				continue
			}
			out = append(out, ids[i])
		}
		for k := range pos {
			pos[k] = moved[pos[k]]
		}
		ids = out
	}
	merged := make([]Range, len(ranges))
	for i, r := range ranges {
		merged[i] = Range{Offset: pos[r.Offset], Length: r.Length}
	}
	return ids, merged
}
