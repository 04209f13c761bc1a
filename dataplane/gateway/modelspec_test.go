package gateway

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// TestModelSpecs: the --model syntax, and the models refused at start.
func TestModelSpecs(t *testing.T) {
	parse := []struct {
		in, want, err string
	}{
		{"m=builtin", "m=builtin", ""},
		{" a/b = /x/y ,alias=c,alias=d,tool-parser=hermes,reasoning-parser=none,max-model-len=8192",
			"a/b=/x/y,alias=c,alias=d,tool-parser=hermes,reasoning-parser=none,max-model-len=8192", ""},
		{"m", "", "want NAME=DIR"},
		{"m=", "", "want NAME=DIR"},
		{"=dir", "", "want NAME=DIR"},
		{"m=d,alias", "", "want key=value"},
		{"m=d,colour=red", "", `unknown option "colour"`},
		{"m=d,max-model-len=-1", "", "want a number"},
	}
	for _, c := range parse {
		s, err := ParseModelSpec(c.in)
		switch {
		case c.err == "" && (err != nil || s.String() != c.want):
			t.Errorf("%q: %q, %v; want %q", c.in, s.String(), err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrModelConfig)):
			t.Errorf("%q: %v, want an ErrModelConfig with %q", c.in, err, c.err)
		}
	}
	tj, cj, err := tokenize.BuiltinFiles()
	if err != nil {
		t.Fatal(err)
	}
	raising, err := tokenize.NewWithChatTemplate(tj, cj, `{{ raise_exception("this template renders nothing") }}`)
	if err != nil {
		t.Fatal(err)
	}
	builtin, _ := tokenize.Builtin()
	refused := []struct {
		name   string
		models []*Model
		want   string
	}{
		{"template raises", []*Model{{Name: "m", Tok: raising}}, "this template renders nothing"},
		{"alias twice", []*Model{{Name: "a", Tok: builtin, Aliases: []string{"x"}}, {Name: "b", Tok: builtin, Aliases: []string{"x"}}}, `"x" names both`},
		{"name is an alias", []*Model{{Name: "a", Tok: builtin}, {Name: "b", Tok: builtin, Aliases: []string{"a"}}}, `"a" names both`},
		{"unknown parser", []*Model{{Name: "a", Tok: builtin, ToolParser: "mystery"}}, "mystery"},
		{"no tokenizer", []*Model{{Name: "a"}}, "no tokenizer"},
	}
	for _, c := range refused {
		if err := CheckModels(c.models); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if err := CheckModels([]*Model{{Name: "m", Tok: raising}}); !errors.Is(err, ErrChatTemplate) {
		t.Errorf("a raising template: %v, want ErrChatTemplate", err)
	}
	if _, err := (ModelSpec{Name: "m", Dir: t.TempDir()}).Load(); err == nil || !strings.Contains(err.Error(), `model "m": loading the tokenizer`) {
		t.Errorf("a directory without a tokenizer: %v", err)
	}
}
