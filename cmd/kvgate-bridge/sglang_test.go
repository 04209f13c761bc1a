package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
)

// TestSGLangRefused: --engine-kind sglang in front of an SGLang server
// whose page size is not --block-size, or of a server that is not SGLang
// (a vLLM), exits 1 before accepting a router, with a log line naming the
// difference.
func TestSGLangRefused(t *testing.T) {
	sgl, err := vllmtest.Start("m", 16, 64, vllmtest.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	defer sgl.Close()
	vl, err := vllmtest.Start("m", 16, 64, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	defer vl.Close()
	for _, c := range []struct {
		url, blockSize, want string
	}{
		{sgl.URL, "32", "--block-size 32, but the server's --page-size is 16"},
		{vl.URL, "16", "not an SGLang server"},
	} {
		var log bytes.Buffer
		rc := run([]string{"--engine-kind", "sglang", "--engine-url", c.url, "--model", "m", "--block-size", c.blockSize,
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--connect-timeout", "30s"}, &log)
		if rc != 1 || !strings.Contains(log.String(), "engine refused") || !strings.Contains(log.String(), c.want) {
			t.Errorf("%s: exit %d, log %s; want 1 and %q", c.url, rc, log.String(), c.want)
		}
	}
}

// TestVLLMKindWarnsOfSGLang: --engine-kind vllm in front of an SGLang
// server still starts (its OpenAI API may serve), with a warning that
// names --engine-kind sglang.
func TestVLLMKindWarnsOfSGLang(t *testing.T) {
	sgl, err := vllmtest.Start("m", 16, 64, vllmtest.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	defer sgl.Close()
	c, err := parseFlags([]string{"--engine-url", sgl.URL, "--model", "m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 16, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := startVLLM(context.Background(), c, h, slog.New(slog.NewJSONHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "run kvgate-bridge with --engine-kind sglang") {
		t.Fatalf("log: %s", log.String())
	}
}
