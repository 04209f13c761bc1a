package vllm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// vllmModelList is GET /v1/models as vLLM answers it with a LoRA adapter
// loaded (the base model's card has max_model_len, the adapter's none).
const vllmModelList = `{"object":"list","data":[` +
	`{"id":"Qwen/Qwen3-8B","object":"model","created":1764578000,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":40960,"permission":[{"id":"modelperm-1","object":"model_permission","created":1764578000,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]},` +
	`{"id":"sql-lora","object":"model","created":1764578000,"owned_by":"vllm","root":"/adapters/sql","parent":"Qwen/Qwen3-8B","max_model_len":null,"permission":[]}]}`

func TestFetchMaxModelLen(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(vllmModelList))
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, c := range []struct {
		model string
		want  int
		err   string
	}{
		{"Qwen/Qwen3-8B", 40960, ""},
		{"sql-lora", 0, ""},
		{"other", 0, `does not list "other"`},
	} {
		n, err := FetchMaxModelLen(ctx, srv.Client(), srv.URL, c.model)
		if n != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %d %v, want %d %q", c.model, n, err, c.want, c.err)
		}
	}
	if _, err := FetchMaxModelLen(ctx, srv.Client(), srv.URL+"/nope", "Qwen/Qwen3-8B"); err == nil {
		t.Error("a 404 was read as a listing")
	}
}
