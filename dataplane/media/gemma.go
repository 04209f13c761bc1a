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
