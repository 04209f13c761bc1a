package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// ModelSpec is one served model as configured, before its tokenizer is
// loaded (Load): kvgate's --model flag, written
//
//	NAME=DIR[,alias=ALIAS]...[,tool-parser=P][,reasoning-parser=P][,max-model-len=N]
//
// NAME is the model's name as engines announce it; DIR the directory of
// its tokenizer.json, tokenizer_config.json and optional
// chat_template.jinja, or "builtin" for the built-in Qwen3 tokenizer.
// alias may repeat. The parsers take the names of --tool-parser and
// --reasoning-parser; an option not given takes the flag's value.
type ModelSpec struct {
	Name, Dir                   string
	Aliases                     []string
	ToolParser, ReasoningParser string
	MaxModelLen                 int
}

// BuiltinDir is the ModelSpec.Dir that names the built-in tokenizer.
const BuiltinDir = "builtin"

// ModelSpecSyntax is ModelSpec's syntax, for flag help and errors.
const ModelSpecSyntax = "NAME=DIR[,alias=ALIAS]...[,tool-parser=P][,reasoning-parser=P][,max-model-len=N]"

// ParseModelSpec parses a --model value.
func ParseModelSpec(v string) (ModelSpec, error) {
	var s ModelSpec
	head, opts, _ := strings.Cut(v, ",")
	name, dir, ok := strings.Cut(head, "=")
	s.Name, s.Dir = strings.TrimSpace(name), strings.TrimSpace(dir)
	if !ok || s.Name == "" || s.Dir == "" {
		return s, fmt.Errorf("%w: --model %q: want %s", ErrModelConfig, v, ModelSpecSyntax)
	}
	if opts == "" {
		return s, nil
	}
	for _, opt := range strings.Split(opts, ",") {
		key, val, ok := strings.Cut(opt, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || val == "" {
			return s, fmt.Errorf("%w: --model %s: option %q: want key=value", ErrModelConfig, s.Name, opt)
		}
		switch key {
		case "alias":
			s.Aliases = append(s.Aliases, val)
		case "tool-parser":
			s.ToolParser = val
		case "reasoning-parser":
			s.ReasoningParser = val
		case "max-model-len":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return s, fmt.Errorf("%w: --model %s: max-model-len %q: want a number of tokens", ErrModelConfig, s.Name, val)
			}
			s.MaxModelLen = n
		default:
			return s, fmt.Errorf("%w: --model %s: unknown option %q (alias, tool-parser, reasoning-parser, max-model-len)", ErrModelConfig, s.Name, key)
		}
	}
	return s, nil
}

// String is the spec in ParseModelSpec's syntax.
func (s ModelSpec) String() string {
	var b strings.Builder
	b.WriteString(s.Name + "=" + s.Dir)
	for _, a := range s.Aliases {
		b.WriteString(",alias=" + a)
	}
	if s.ToolParser != "" {
		b.WriteString(",tool-parser=" + s.ToolParser)
	}
	if s.ReasoningParser != "" {
		b.WriteString(",reasoning-parser=" + s.ReasoningParser)
	}
	if s.MaxModelLen > 0 {
		b.WriteString(",max-model-len=" + strconv.Itoa(s.MaxModelLen))
	}
	return b.String()
}

// Load reads the spec's tokenizer and checks the model (Model.Check):
// a tokenizer that fails to load or a chat template that cannot be
// rendered is an error naming the model and the reason.
func (s ModelSpec) Load() (*Model, error) {
	dir := s.Dir
	if dir == BuiltinDir {
		dir = ""
	}
	tok, tokName, err := tokenize.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("model %q: loading the tokenizer in %s: %w", s.Name, s.Dir, err)
	}
	m := &Model{Name: s.Name, Aliases: s.Aliases, Tok: tok, TokName: tokName, MaxModelLen: s.MaxModelLen,
		ToolParser: s.ToolParser, ReasoningParser: s.ReasoningParser}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// LoadModels loads every spec and checks them together (CheckModels).
func LoadModels(specs []ModelSpec) ([]*Model, error) {
	models := make([]*Model, 0, len(specs))
	for _, s := range specs {
		m, err := s.Load()
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	if err := CheckModels(models); err != nil {
		return nil, err
	}
	return models, nil
}
