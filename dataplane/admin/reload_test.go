package admin

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReloadEndpoint: POST /admin/reload runs the reload only with the
// admin token, answers what it applied and refused, and a configuration
// error as bad_config.
func TestReloadEndpoint(t *testing.T) {
	calls := 0
	var fail error
	s := NewServer(prometheus.NewRegistry())
	s.MountReload(func() (*ReloadResult, error) {
		calls++
		if fail != nil {
			return nil, fail
		}
		return &ReloadResult{Applied: []string{"--log-level"}, Refused: []string{"--listen"}}, nil
	}, []byte("tok"))
	hs := httptest.NewServer(s.mux)
	t.Cleanup(hs.Close)

	if status, doc := call(t, hs, "POST", "/admin/reload", "", ""); status != 401 || code(doc) != "unauthorized" {
		t.Fatalf("no token: %d %v", status, doc)
	}
	if status, doc := call(t, hs, "POST", "/admin/reload", "wrong", ""); status != 401 || code(doc) != "unauthorized" {
		t.Fatalf("wrong token: %d %v", status, doc)
	}
	if calls != 0 {
		t.Fatalf("an unauthorized call reloaded (%d calls)", calls)
	}
	status, doc := call(t, hs, "POST", "/admin/reload", "tok", "")
	if status != 200 || calls != 1 {
		t.Fatalf("reload: %d %v (%d calls)", status, doc, calls)
	}
	if a, r := doc["applied"].([]any), doc["refused"].([]any); len(a) != 1 || a[0] != "--log-level" || len(r) != 1 || r[0] != "--listen" {
		t.Fatalf("reload answer: %v", doc)
	}
	fail = errors.New("--config: no such file")
	if status, doc := call(t, hs, "POST", "/admin/reload", "tok", ""); status != 400 || code(doc) != "bad_config" {
		t.Fatalf("bad config: %d %v", status, doc)
	}
	if status, doc := call(t, hs, "GET", "/admin/reload", "tok", ""); status != 405 || code(doc) != "method_not_allowed" {
		t.Fatalf("GET: %d %v", status, doc)
	}

	off := NewServer(prometheus.NewRegistry())
	off.MountReload(func() (*ReloadResult, error) { calls++; return &ReloadResult{}, nil }, nil)
	hsOff := httptest.NewServer(off.mux)
	t.Cleanup(hsOff.Close)
	if status, doc := call(t, hsOff, "POST", "/admin/reload", "tok", ""); status != 403 || code(doc) != "writes_disabled" || calls != 2 {
		t.Fatalf("without a token file: %d %v (%d calls)", status, doc, calls)
	}
}

func code(doc map[string]any) string {
	e, _ := doc["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}
