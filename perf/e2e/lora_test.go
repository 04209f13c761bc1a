//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLoRAByModelName: an engine's LoRA adapter is addressed by its name as
// the model; its cache is its own (the adapter id enters the block hashes).
func TestLoRAByModelName(t *testing.T) {
	s := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", "lora-engine", "--model", model,
		"--lora", "7=sql-adapter", "--profile", "zero")
	_, base := startKvgate(t, "--engine", s.waitLog(t, "serving")["addr"].(string))
	waitReady(t, base)
	models, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(models.Body)
	models.Body.Close()
	if !strings.Contains(string(list), `"sql-adapter"`) {
		t.Fatalf("models: %s", list)
	}
	prompt := strings.Repeat("SELECT name FROM users WHERE id = 1; ", 40)
	cached := func(model string) int {
		r, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 2})
		if r.StatusCode != 200 {
			t.Fatalf("%s: %d %s", model, r.StatusCode, body)
		}
		var out struct {
			Usage usage `json:"usage"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Usage.Details.Cached
	}
	if c := cached("sql-adapter"); c != 0 {
		t.Fatalf("first adapter request cached %d", c)
	}
	if c := cached("sql-adapter"); c == 0 {
		t.Fatal("second adapter request found nothing cached")
	}
	if c := cached(model); c != 0 {
		t.Fatalf("the base model shared the adapter's cache: %d tokens", c)
	}
}
