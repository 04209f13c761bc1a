package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiscoveryFlags: discovery alone is enough engines (a ring included);
// an empty admin token file, a bad DNS name and a bad engine file refuse
// to start, naming the flag.
func TestDiscoveryFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, token := file("empty", " \n"), file("token", "t0ken\n")
	engines, bad := file("engines", "# fleet\n127.0.0.1:7000\n"), file("bad", "127.0.0.1\n")
	for _, c := range []struct {
		name string
		args []string
		want string // part of the error; "" for none
	}{
		{"dns alone", []string{"--engine-dns", "engines.default.svc.cluster.local:7000"}, ""},
		{"dns srv with a ring", []string{"--engine-dns", "_wire._tcp.engines", "--ring-listen", "127.0.0.1:0"}, ""},
		{"engine file", []string{"--engine-file", engines}, ""},
		{"admin token alone", []string{"--admin-token-file", token}, ""},
		{"empty admin token", []string{"--admin-token-file", empty}, "--admin-token-file"},
		{"missing admin token", []string{"--admin-token-file", filepath.Join(dir, "none")}, "--admin-token-file"},
		{"dns port", []string{"--engine-dns", "engines:99999"}, "--engine-dns"},
		{"bad engine file", []string{"--engine-file", bad}, "line 1"},
		{"missing engine file", []string{"--engine-file", filepath.Join(dir, "none")}, "--engine-file"},
		{"zero interval", []string{"--engine-dns", "e:1", "--engine-dns-interval", "0s"}, "must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if c.name == "admin token alone" && string(cfg.discovery.token) != "t0ken" {
				t.Fatalf("token %q", cfg.discovery.token)
			}
		})
	}
}

// TestDeployFlags: the flags of the deploy examples (the systemd unit's
// config file, the Kubernetes Deployment's args) are kvgate's, with values
// of their types; the files they name exist only where deployed, so the
// one error allowed is a missing file.
func TestDeployFlags(t *testing.T) {
	manifest, err := os.ReadFile("deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, l := range strings.Split(string(manifest), "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "- --"); ok {
			args = append(args, "--"+a)
		}
	}
	if len(args) < 8 {
		t.Fatalf("found %d args in the Deployment", len(args))
	}
	for name, a := range map[string][]string{"kvgate.conf": {"--config", "deploy/systemd/kvgate.conf"}, "deployment.yaml": args} {
		_, err := parseFlags(a, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("%s: %v, want only a missing file", name, err)
		}
	}
}
