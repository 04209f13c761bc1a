package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
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
