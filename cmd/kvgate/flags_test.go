package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthConfigFailsClosed: a key, engine secret or ring secret file that
// would leave auth off refuses to start, with a message naming the flag;
// a file with keys among comments and blank lines is read.
func TestAuthConfigFailsClosed(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	comments := file("keys-comments", "# keys\n\n   \n# more\n")
	keys := file("keys", "# keys\n\nk1\n  k2  \n")
	empty := file("empty", "")
	blank := file("blank", " \n\t\n")
	secret := file("secret", "s3cret\n")
	cases := []struct {
		name string
		args []string
		want string // part of the error; "" for none
	}{
		{"comment-only key file", []string{"--api-key-file", comments}, "holds no API key"},
		{"empty key file", []string{"--api-key-file", empty}, "holds no API key"},
		{"key file", []string{"--api-key-file", keys}, ""},
		{"empty engine secret file", []string{"--engine-secret-file", empty}, "--engine-secret-file"},
		{"blank engine secret file", []string{"--engine-secret-file", blank}, "is empty"},
		{"engine secret file", []string{"--engine-secret-file", secret}, ""},
		{"empty ring secret file", []string{"--engine", "127.0.0.1:1", "--sim-engines", "0", "--ring-listen", "127.0.0.1:0",
			"--ring-secret-file", empty}, "--ring-secret-file"},
		{"ring secret file", []string{"--engine", "127.0.0.1:1", "--sim-engines", "0", "--ring-listen", "127.0.0.1:0",
			"--ring-secret-file", secret}, ""},
		{"zero pipeline window", []string{"--pipeline-window", "0"}, "must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if !strings.Contains(strings.Join(args, " "), "--engine ") {
				args = append([]string{"--sim-engines", "1"}, args...)
			}
			cfg, err := parseFlags(args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if c.name == "key file" && (!cfg.apiKeys["k1"] || !cfg.apiKeys["k2"] || len(cfg.apiKeys) != 2) {
				t.Fatalf("keys %v", cfg.apiKeys)
			}
			if c.name == "engine secret file" && string(cfg.secret) != "s3cret" {
				t.Fatalf("secret %q", cfg.secret)
			}
		})
	}
}

// TestModelFlags: --model repeats, from the config file and the command
// line once each; options not given take the one-model flags; --model
// with --tokenizer is refused; --check-config loads every model and
// names the one whose tokenizer does not load.
func TestModelFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "kvgate.conf")
	if err := os.WriteFile(conf, []byte("model = a=builtin,alias=x,tool-parser=none\nhttp-engine = http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	llama := "../../dataplane/tokenize/testdata/families/llama2"
	cfg, err := parseFlags([]string{"--sim-engines", "1", "--check-config", "--config", conf, "--tool-parser", "hermes", "--max-model-len", "2048",
		"--engine-dns", "engines.example:7000", "--model", "b=" + llama + ",max-model-len=4096,reasoning-parser=none"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.discovery.dnsSpecs) != 1 || cfg.configFile != conf {
		t.Fatalf("--engine-dns %v, --config %q: the command line was read twice or the file not at all", cfg.discovery.dnsSpecs, cfg.configFile)
	}
	// A flag's value is never taken for --config.
	if cfg, err := parseFlags([]string{"--api-key", "--config", "--sim-engines", "1"}, io.Discard); err != nil || cfg.configFile != "" || !cfg.apiKeys["--config"] {
		t.Fatalf("--api-key --config: %+v, %v", cfg, err)
	}
	var got []string
	for _, m := range cfg.models {
		got = append(got, m.String())
	}
	want := []string{"a=builtin,alias=x,tool-parser=none,max-model-len=2048", "b=" + llama + ",tool-parser=hermes,reasoning-parser=none,max-model-len=4096"}
	if strings.Join(got, " ") != strings.Join(want, " ") || len(cfg.httpEngines) != 1 {
		t.Fatalf("models %q (http engines %v), want %q and one http engine", got, cfg.httpEngines, want)
	}
	tk, err := loadTokenizers(cfg)
	if err != nil || len(tk.models) != 2 || tk.simModel != "a" || tk.models[1].Tok.VocabSize() == tk.models[0].Tok.VocabSize() {
		t.Fatalf("loaded %+v, %v", tk, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tokenizer", llama, "--model", "a=builtin"}, "not both"},
		{[]string{"--model", "a=builtin,tool-parser=mystery"}, "mystery"},
		{[]string{"--model", "a"}, "NAME=DIR"},
	} {
		if _, err := parseFlags(append([]string{"--sim-engines", "1"}, c.args...), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
	var out strings.Builder
	if rc := run([]string{"--sim-engines", "1", "--model", "a=builtin", "--model", "b=" + dir, "--check-config"}, &out); rc != 2 ||
		!strings.Contains(out.String(), `model "b": loading the tokenizer`) {
		t.Fatalf("--check-config with a model that does not load: %d %q", rc, out.String())
	}
}

// TestTokenizerTemplateChecked: the one-model --tokenizer's chat template
// is rendered at start too; one that cannot render a plain conversation
// is refused, naming the reason.
func TestTokenizerTemplateChecked(t *testing.T) {
	dir := t.TempDir()
	src := "../../dataplane/tokenize/testdata/families/llama2/"
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(src + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if rc := run([]string{"--sim-engines", "1", "--tokenizer", dir, "--check-config"}, &out); rc != 0 {
		t.Fatalf("a tokenizer without a chat template (completions only): %d %s", rc, out.String())
	}
	tmpl := `{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message must come first') }}{% endif %}`
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if rc := run([]string{"--sim-engines", "1", "--tokenizer", dir, "--check-config"}, &out); rc != 2 ||
		!strings.Contains(out.String(), "--tokenizer: gateway: chat template cannot be rendered") || !strings.Contains(out.String(), "a system message must come first") {
		t.Fatalf("a template that cannot render: %d %q", rc, out.String())
	}
}
