package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServePprof: --pprof-listen serves this process's profiles at the
// address it prints, and stops with the context.
func TestServePprof(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	if err := servePprof(ctx, "127.0.0.1:0", &stderr); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(stderr.String())
	url := line[strings.Index(line, "http://"):]
	resp, err := http.Get(url + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "TestServePprof") {
		t.Fatalf("status %d, goroutine profile without this test's goroutine:\n%.500s", resp.StatusCode, body)
	}
	cancel()
	for { // the server closes soon after the context ends; a hang here is the failure
		resp, err := http.Get(url)
		if err != nil {
			return
		}
		resp.Body.Close()
	}
}
