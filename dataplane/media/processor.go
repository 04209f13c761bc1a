package media

import (
	"fmt"
	"sort"
	"strings"
)

// Run is Count copies of one token in an image's expansion. Text runs
// are plain text the processor adds around the image (Gemma 3's blank
// lines), tokenized with their neighbours, so they count no token here.
type Run struct {
	Token string
	Count int
	Text  bool
}

// Expansion is what a model's processor puts in the prompt for one image,
// in place of the marker the chat template emits for it.
type Expansion struct {
	Runs []Run
	// Features is how many tokens carry the image's embeddings.
	Features int
}

// Tokens is the number of special tokens of the expansion (features and
// their delimiters), the length of the image's placeholder range.
func (e Expansion) Tokens() int {
	n := 0
	for _, r := range e.Runs {
		if !r.Text {
			n += r.Count
		}
	}
	return n
}

// Processor is a model family's image processor, as far as the prompt
// goes: the marker its chat template emits for an image and the tokens
// the processor replaces it with for an image of a given size.
type Processor interface {
	// Name is the processor's name in --media-processor.
	Name() string
	// Marker is the token the chat template writes for each image.
	Marker() string
	// Expand is the expansion for a width x height image.
	Expand(width, height int) (Expansion, error)
}

// TokenMerger is a processor whose expansions put text next to the
// prompt's own that the model's tokenizer would have merged with it
// (Gemma 3's blank lines): MergeTokens redoes that merge on placed ids
// (Place's output) and moves the ranges with it.
type TokenMerger interface {
	MergeTokens(ids []uint32, ranges []Range, v Vocab) ([]uint32, []Range)
}

// ProcessorOptions override a processor's defaults as a checkpoint's
// preprocessor_config.json does; zero keeps the default.
type ProcessorOptions struct {
	// MinPixels and MaxPixels bound the resized image (Qwen-VL's
	// min_pixels and max_pixels, size.shortest_edge / longest_edge).
	MinPixels, MaxPixels int
	// MaxTiles bounds the tiles (Llama 4's max_patches).
	MaxTiles int
}

// processors are the known processors by name, built from options.
var processors = map[string]func(ProcessorOptions) (Processor, error){
	"qwen2-vl":   func(o ProcessorOptions) (Processor, error) { return newQwen("qwen2-vl", qwen2VL, o) },
	"qwen2.5-vl": func(o ProcessorOptions) (Processor, error) { return newQwen("qwen2.5-vl", qwen2VL, o) },
	"qwen3-vl":   func(o ProcessorOptions) (Processor, error) { return newQwen("qwen3-vl", qwen3VL, o) },
	"gemma3":     func(o ProcessorOptions) (Processor, error) { return gemma3{}, noOptions("gemma3", o) },
	"llama4":     newLlama4,
}

// ProcessorNames lists the known processors, for flag help and errors.
func ProcessorNames() string {
	names := make([]string, 0, len(processors))
	for n := range processors {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// NewProcessor is the named processor with options applied; a name
// kvgate does not know is refused by name.
func NewProcessor(name string, o ProcessorOptions) (Processor, error) {
	mk, ok := processors[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %s)", ErrNoProcessor, name, ProcessorNames())
	}
	return mk(o)
}

func noOptions(name string, o ProcessorOptions) error {
	if o != (ProcessorOptions{}) {
		return fmt.Errorf("%w: %s takes no options (its image token count is fixed)", ErrNoProcessor, name)
	}
	return nil
}
