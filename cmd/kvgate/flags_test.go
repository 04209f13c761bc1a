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
