package gateway

import (
	"testing"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// TestSetAPIKeys: keys swapped while serving take effect at once, the old
// ones refused from then on, by either header.
func TestSetAPIKeys(t *testing.T) {
	g := &Gateway{APIKeys: map[string]bool{"old": true}}
	with := func(name, value string) *httpx.Request {
		return &httpx.Request{Header: httpx.Header{{Name: name, Value: value}}}
	}
	check := func(when string, want map[string]bool) {
		t.Helper()
		for key, ok := range want {
			if got := g.authorized(with("x-api-key", key)); got != ok {
				t.Errorf("%s: x-api-key %q authorized %v, want %v", when, key, got, ok)
			}
			if got := g.authorized(with("Authorization", "Bearer "+key)); got != ok {
				t.Errorf("%s: bearer %q authorized %v, want %v", when, key, got, ok)
			}
		}
	}
	check("before the swap", map[string]bool{"old": true, "new": false})
	g.SetAPIKeys(map[string]bool{"new": true})
	check("after the swap", map[string]bool{"old": false, "new": true})
}
