package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
)

// poolAdmin is the engine endpoints straight on a pool.
type poolAdmin struct{ *engine.Pool }

func (p poolAdmin) AddEngine(a string) (*engine.Engine, error)    { return p.Add(a) }
func (p poolAdmin) DrainEngine(k string) (*engine.Engine, error)  { return p.Drain(k) }
func (p poolAdmin) RemoveEngine(k string) (*engine.Engine, error) { return p.Remove(k) }

func engineAPI(t *testing.T, token string) (*httptest.Server, *engine.Pool) {
	t.Helper()
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), []string{"127.0.0.1:1"})
	t.Cleanup(pool.Close)
	s := NewServer(prometheus.NewRegistry())
	s.MountEngines(poolAdmin{pool}, []byte(token))
	hs := httptest.NewServer(s.mux)
	t.Cleanup(hs.Close)
	return hs, pool
}

func call(t *testing.T, hs *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q (body %s)", method, path, ct, b)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return resp.StatusCode, doc
}

// TestEngineAPI: each endpoint's answer and every refusal, with its status
// and a JSON error code.
func TestEngineAPI(t *testing.T) {
	hs, pool := engineAPI(t, "s3cret")
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string // error code; "" for success
	}{
		{"list", "GET", "/admin/engines", "", "", 200, ""},
		{"add without a token", "POST", "/admin/engines", "", `{"address": "127.0.0.1:2"}`, 401, "unauthorized"},
		{"add with a wrong token", "POST", "/admin/engines", "guess", `{"address": "127.0.0.1:2"}`, 401, "unauthorized"},
		{"add", "POST", "/admin/engines", "s3cret", `{"address": "127.0.0.1:2"}`, 201, ""},
		{"add again", "POST", "/admin/engines", "s3cret", `{"address": "127.0.0.1:2"}`, 409, "engine_exists"},
		{"add no port", "POST", "/admin/engines", "s3cret", `{"address": "engine-0"}`, 400, "bad_address"},
		{"add no address", "POST", "/admin/engines", "s3cret", `{}`, 400, "missing_address"},
		{"add unknown field", "POST", "/admin/engines", "s3cret", `{"address": "127.0.0.1:3", "weight": 2}`, 400, "bad_json"},
		{"add not JSON", "POST", "/admin/engines", "s3cret", `address=127.0.0.1:3`, 400, "bad_json"},
		{"add two objects", "POST", "/admin/engines", "s3cret", `{"address": "127.0.0.1:3"} {}`, 400, "bad_json"},
		{"add too big", "POST", "/admin/engines", "s3cret", `{"address": "` + strings.Repeat("a", maxEngineBody) + `"}`, 413, "body_too_large"},
		{"drain unknown", "POST", "/admin/engines/nope:1/drain", "s3cret", "", 404, "unknown_engine"},
		{"drain", "POST", "/admin/engines/127.0.0.1:1/drain", "s3cret", "", 202, ""},
		{"delete without a token", "DELETE", "/admin/engines/127.0.0.1:2", "", "", 401, "unauthorized"},
		{"delete", "DELETE", "/admin/engines/127.0.0.1:2", "s3cret", "", 202, ""},
		{"delete unknown", "DELETE", "/admin/engines/nope:1", "s3cret", "", 404, "unknown_engine"},
		{"wrong method", "PUT", "/admin/engines", "s3cret", "", 405, "method_not_allowed"},
		{"no such endpoint", "POST", "/admin/engines/127.0.0.1:1/undrain", "s3cret", "", 404, "not_found"},
	} {
		status, doc := call(t, hs, tc.method, tc.path, tc.token, tc.body)
		code := ""
		if e, ok := doc["error"].(map[string]any); ok {
			code, _ = e["code"].(string)
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("%s: error without a message: %v", tc.name, doc)
			}
		}
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %v, want %d with code %q", tc.name, status, doc, tc.status, tc.code)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pool.Engines()) != 1 || pool.Engines()[0].State() != engine.StateDrained {
		if time.Now().After(deadline) {
			t.Fatalf("engines after drain and delete: %d", len(pool.Engines()))
		}
		time.Sleep(time.Millisecond)
	}
	_, doc := call(t, hs, "GET", "/admin/engines", "", "")
	es := doc["engines"].([]any)
	if e := es[0].(map[string]any); len(es) != 1 || e["address"] != "127.0.0.1:1" || e["state"] != "drained" || e["ready"] != false {
		t.Fatalf("list after drain and delete: %v", doc)
	}
}

// TestEngineAPIWithoutToken: without --admin-token-file the writes are
// refused, the list is served.
func TestEngineAPIWithoutToken(t *testing.T) {
	hs, _ := engineAPI(t, "")
	if status, doc := call(t, hs, "POST", "/admin/engines", "anything", `{"address": "127.0.0.1:2"}`); status != 403 {
		t.Fatalf("a write without a configured token: %d %v", status, doc)
	}
	if status, _ := call(t, hs, "GET", "/admin/engines", "", ""); status != 200 {
		t.Fatalf("list: %d", status)
	}
}
