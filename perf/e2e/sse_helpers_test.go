//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"testing"
)

// sseError returns the first event of an OpenAI-style SSE body whose JSON
// is an error (a top-level "error" field), or "" when none is. A body is
// not searched for the text "error": a generated token's text may be that
// word, and a delta of it reads `"content":"error"`.
func sseError(body []byte) string {
	for line := range bytes.Lines(body) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var ev struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Error != nil {
			return string(data) // an event that is not JSON is an error too
		}
	}
	return ""
}

// TestSSEError: a delta whose text is "error" is no error; an error event
// and a broken event are.
func TestSSEError(t *testing.T) {
	ok := "data: {\"choices\":[{\"delta\":{\"content\":\"error\"},\"index\":0}]}\n\ndata: [DONE]\n\n"
	failed := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"index\":0}]}\n\ndata: {\"error\":{\"message\":\"engine down\"}}\n\ndata: [DONE]\n\n"
	broken := "data: {\"choices\":[\n\ndata: [DONE]\n\n"
	if ev := sseError([]byte(ok)); ev != "" {
		t.Errorf("a delta of the word error read as an error: %s", ev)
	}
	if ev := sseError([]byte(failed)); ev != `{"error":{"message":"engine down"}}` {
		t.Errorf("the error event was not found: %q", ev)
	}
	if ev := sseError([]byte(broken)); ev == "" {
		t.Error("an event that is not JSON was not found")
	}
}
