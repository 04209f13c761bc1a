package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Errors of the package.
var (
	// ErrInvalidShape is a Shape llama.cpp could not run.
	ErrInvalidShape = errors.New("gguf: invalid model shape")
	// ErrInvalidTokenizer is a tokenizer.json or tokenizer_config.json
	// that cannot be converted: malformed, not BPE, or ambiguous.
	ErrInvalidTokenizer = errors.New("gguf: invalid tokenizer")
	// ErrUnknownPreTokenizer is a pre-tokenizer regex no llama.cpp
	// pre-tokenizer is known to implement; Options.Pre can name one.
	ErrUnknownPreTokenizer = errors.New("gguf: no known llama.cpp pre-tokenizer for this split regex")
	// ErrNoBuiltinTokenizer is returned when the built-in Qwen3 tokenizer's
	// files cannot be found beside the package's source.
	ErrNoBuiltinTokenizer = errors.New("gguf: built-in tokenizer files not found")
)

// TensorType is a ggml tensor type (enum ggml_type).
type TensorType uint32

// The tensor types the writer produces.
const (
	F32 TensorType = 0
	F16 TensorType = 1
)

func (t TensorType) size() int64 {
	if t == F16 {
		return 2
	}
	return 4
}

// Options says what model Write makes. Start from Defaults.
type Options struct {
	// Shape is the model's hyperparameters.
	Shape Shape
	// Type is the type of the weight matrices, F16 or F32; norm weights
	// are F32 either way.
	Type TensorType
	// Seed makes the weights: one seed, one file, byte for byte.
	Seed uint64
	// Tokenizer is the tokenizer to embed; zero means kvgate's built-in
	// Qwen3 tokenizer (see BuiltinTokenizer).
	Tokenizer TokenizerFiles
	// Pre overrides the llama.cpp pre-tokenizer name (tokenizer.ggml.pre)
	// that is otherwise chosen from tokenizer.json's split regex.
	Pre string
	// Name is general.name, which llama-server reports as the model.
	Name string
	// GenerateAll lets the model generate any token, as a trained model
	// may. By default its weights steer generation, greedy or sampled,
	// onto the normal tokens whose bytes are whole UTF-8 (Vocab.Generate):
	// a random model would otherwise emit byte fragments that concatenate
	// to invalid UTF-8, which this llama-server answers with HTTP 500
	// ("does not match the expected Content-only format"), special tokens
	// that its chat parsers act on (<think>, <tool_call>) and
	// end-of-generation tokens, so outputs stop only at max_tokens.
	// Steering needs an output matrix of its own (Shape.TiedOutput off).
	GenerateAll bool
}

// Defaults returns the Small shape in F16 with seed 1 and the built-in
// tokenizer.
func Defaults() Options {
	return Options{Shape: Small(), Type: F16, Seed: 1, Name: "kvgate-random-llama"}
}

// Validate reports the first problem of o.
func (o Options) Validate() error {
	if err := o.Shape.Validate(); err != nil {
		return err
	}
	if o.Shape.TiedOutput && !o.GenerateAll {
		return fmt.Errorf("%w: a tied output matrix cannot steer generation: set GenerateAll", ErrInvalidShape)
	}
	if o.Type != F16 && o.Type != F32 {
		return fmt.Errorf("%w: tensor type %d (F32 or F16 only)", ErrInvalidShape, o.Type)
	}
	return nil
}

// Info describes a written model.
type Info struct {
	// Params counts the model's parameters, embeddings included.
	Params int64
	// VocabSize is the number of tokens (n_vocab).
	VocabSize int
	// Bytes is the file's size.
	Bytes int64
	// Vocab is the tokenizer as the file holds it; it may be shared
	// between calls and must not be modified.
	Vocab *Vocab
}

// Write writes the model o describes to w.
func Write(w io.Writer, o Options) (Info, error) {
	if err := o.Validate(); err != nil {
		return Info{}, err
	}
	v, err := o.vocab()
	if err != nil {
		return Info{}, err
	}
	tensors := o.Shape.tensors(len(v.Tokens))
	e := newEncoder(w)
	e.write([]byte(magic))
	e.u32(version)
	meta := metadata(o, v)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, p := range meta {
		e.kv(p)
	}
	var offset int64
	for _, t := range tensors {
		typ := o.tensorType(t)
		e.tensorInfo(t.name, t.ne, typ, offset)
		offset = aligned(offset + t.elements()*typ.size())
	}
	e.pad()
	info := Info{VocabSize: len(v.Tokens), Vocab: v}
	ws := &weights{seed: o.Seed, steer: !o.GenerateAll, generate: v.Generate}
	for i, t := range tensors {
		ws.write(e, t, o.tensorType(t), uint64(i))
		e.pad()
		info.Params += t.elements()
	}
	info.Bytes = e.n
	if err := e.flush(); err != nil {
		return Info{}, fmt.Errorf("writing model: %w", err)
	}
	return info, nil
}

// WriteFile writes the model o describes to path, through a temporary file
// renamed into place, so a reader never sees half a model.
func WriteFile(path string, o Options) (Info, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return Info{}, fmt.Errorf("writing model: %w", err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	info, err := Write(f, o)
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp's 0600 would keep a shared model private
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing model: %w", cerr)
	}
	if err != nil {
		return Info{}, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return Info{}, fmt.Errorf("writing model: %w", err)
	}
	return info, nil
}

var (
	builtinOnce  sync.Once
	builtinVocab *Vocab
	builtinErr   error
)

// vocab converts o's tokenizer; the built-in one is converted once per
// process (parsing its 7 MB of JSON takes most of the time a small model
// takes to write).
func (o Options) vocab() (*Vocab, error) {
	if len(o.Tokenizer.JSON) > 0 {
		return NewVocab(o.Tokenizer, o.Pre)
	}
	builtinOnce.Do(func() {
		var files TokenizerFiles
		if files, builtinErr = BuiltinTokenizer(); builtinErr == nil {
			builtinVocab, builtinErr = NewVocab(files, "")
		}
	})
	if builtinErr != nil || o.Pre == "" || o.Pre == builtinVocab.Pre {
		return builtinVocab, builtinErr
	}
	v := *builtinVocab
	v.Pre = o.Pre
	return &v, nil
}

func (o Options) tensorType(t tensorSpec) TensorType {
	if t.kind == kindNorm {
		return F32
	}
	return o.Type
}

// metadata lists the KV pairs in file order.
func metadata(o Options, v *Vocab) []kv {
	s := o.Shape
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if o.Type == F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	meta := []kv{
		{"general.architecture", "llama"},
		{"general.name", o.Name},
		{"general.alignment", uint32(alignment)},
		{"general.file_type", fileType},
		{"llama.vocab_size", uint32(len(v.Tokens))},
		{"llama.context_length", uint32(s.ContextLength)},
		{"llama.embedding_length", uint32(s.Embedding)},
		{"llama.block_count", uint32(s.Blocks)},
		{"llama.feed_forward_length", uint32(s.FeedForward)},
		{"llama.attention.head_count", uint32(s.Heads)},
		{"llama.attention.head_count_kv", uint32(s.KVHeads)},
		{"llama.attention.layer_norm_rms_epsilon", s.RMSEpsilon},
		{"llama.rope.dimension_count", uint32(s.HeadDim())},
		{"llama.rope.freq_base", s.RopeFreqBase},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", v.Pre},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.merges", v.Merges},
	}
	for _, id := range []struct {
		key string
		id  int
	}{{"tokenizer.ggml.bos_token_id", v.BOS}, {"tokenizer.ggml.eos_token_id", v.EOS}, {"tokenizer.ggml.padding_token_id", v.Pad}} {
		if id.id >= 0 {
			meta = append(meta, kv{id.key, uint32(id.id)})
		}
	}
	meta = append(meta,
		kv{"tokenizer.ggml.add_bos_token", v.AddBOS},
		kv{"tokenizer.ggml.add_eos_token", v.AddEOS},
	)
	if v.ChatTemplate != "" {
		meta = append(meta, kv{"tokenizer.chat_template", v.ChatTemplate})
	}
	if names := v.namedTemplateKeys(); len(names) > 0 {
		for _, n := range names {
			meta = append(meta, kv{"tokenizer.chat_template." + n, v.NamedTemplates[n]})
		}
		meta = append(meta, kv{"tokenizer.chat_templates", names})
	}
	return meta
}
