package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnsupported is returned for a tokenizer.json that uses a component or
// option this package does not implement. The error names the part, so a
// tokenizer is refused at load instead of being silently mis-tokenized.
var ErrUnsupported = errors.New("tokenize: unsupported tokenizer component")

// ErrInvalid is returned for a tokenizer.json or tokenizer_config.json that
// is not well formed.
var ErrInvalid = errors.New("tokenize: invalid tokenizer files")

func unsupported(part string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(part, args...))
}

// tokenizerJSON mirrors the parts of Hugging Face's tokenizer.json we read.
type tokenizerJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    *componentJSON   `json:"normalizer"`
	PreTokenizer  *componentJSON   `json:"pre_tokenizer"`
	PostProcessor *componentJSON   `json:"post_processor"`
	Decoder       *componentJSON   `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// componentJSON is any normalizer, pre-tokenizer, post-processor or decoder.
type componentJSON struct {
	Type string `json:"type"`
	// Sequence members (normalizers / pretokenizers / processors / decoders).
	Normalizers   []*componentJSON `json:"normalizers"`
	PreTokenizers []*componentJSON `json:"pretokenizers"`
	Processors    []*componentJSON `json:"processors"`
	Decoders      []*componentJSON `json:"decoders"`
	// Split.
	Pattern  *patternJSON `json:"pattern"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`
	// ByteLevel (and Metaspace, which refuses add_prefix_space false
	// unless prepend_scheme is "never").
	AddPrefixSpace *bool `json:"add_prefix_space"`
	TrimOffsets    bool  `json:"trim_offsets"`
	UseRegex       *bool `json:"use_regex"`
	// Metaspace (pre-tokenizer and decoder).
	Replacement   *string `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
	// Prepend normalizer; Replace normalizer and decoder (with Pattern);
	// Strip decoder (content, start, stop) and normalizer (strip_left,
	// strip_right); Precompiled normalizer.
	Prepend             *string `json:"prepend"`
	Content             *string `json:"content"`
	Start               int     `json:"start"`
	Stop                int     `json:"stop"`
	StripLeft           bool    `json:"strip_left"`
	StripRight          bool    `json:"strip_right"`
	PrecompiledCharsmap *string `json:"precompiled_charsmap"`
	// TemplateProcessing.
	Single        []templatePieceJSON         `json:"single"`
	SpecialTokens map[string]specialTokenJSON `json:"special_tokens"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type templatePieceJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type specialTokenJSON struct {
	ID  string   `json:"id"`
	IDs []uint32 `json:"ids"`
}

type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
	UnkID                   *int     `json:"unk_id"` // Unigram
	// Vocab is a map from token to id for BPE, a list of [piece, score]
	// for Unigram: it is read once the model type is known.
	Vocab  json.RawMessage `json:"vocab"`
	Merges json.RawMessage `json:"merges"`
}

// parseMerges reads merges in either encoding tokenizers has used: "a b"
// strings, or ["a", "b"] pairs. Like Hugging Face's loader it refuses a
// pair that is not two non-empty strings and merges that are null, where
// encoding/json alone would fill a short pair with "" and drop the rest
// of a long one.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		if pairs == nil {
			return nil, fmt.Errorf("%w: merges are null", ErrInvalid)
		}
		if !pairsOfTwo(raw) {
			return nil, fmt.Errorf("%w: a merge is not a pair", ErrInvalid)
		}
		for i, p := range pairs {
			if p[0] == "" || p[1] == "" {
				return nil, fmt.Errorf("%w: merge %d %q", ErrInvalid, i, p)
			}
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("%w: merges are neither strings nor pairs", ErrInvalid)
	}
	pairs = make([][2]string, len(lines))
	for i, l := range lines {
		var a, b string
		for j := 0; j < len(l); j++ {
			if l[j] == ' ' {
				a, b = l[:j], l[j+1:]
				break
			}
		}
		if a == "" || b == "" {
			return nil, fmt.Errorf("%w: merge %d %q", ErrInvalid, i, l)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

// pairsOfTwo says whether every member of raw, a JSON array of arrays of
// strings (or nulls) already known to be valid JSON, has two members. It
// only counts, without decoding: decoding each pair into a slice to see
// its length would make loading Qwen3's 151,387 merges take twice as long.
func pairsOfTwo(raw []byte) bool {
	depth, members, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"', 'n': // a string or a null starts a member
			inString = c == '"'
			if depth == 2 && members == 0 {
				members = 1
			}
		case ',':
			if depth == 2 {
				members++
			}
		case '[':
			if depth++; depth == 2 {
				members = 0
			}
		case ']':
			if depth == 2 && members != 2 {
				return false
			}
			depth--
		}
	}
	return true
}

// configJSON mirrors tokenizer_config.json.
type configJSON struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
	// TokenizerClass is transformers' class; some rebuild the
	// post-processor from add_bos_token and add_eos_token (classpost.go).
	TokenizerClass string  `json:"tokenizer_class"`
	ModelMaxLen    float64 `json:"model_max_length"`
}

// tokenString reads a special token given as a string or as
// {"content": "..."} (both appear in the wild).
func tokenString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}
