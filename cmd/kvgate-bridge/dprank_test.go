package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestDPRankFlag: --dp-rank fronts one rank of vLLM's external data
// parallelism as an engine of one rank, named apart from its host's other
// ranks unless --id says otherwise; it is refused with --dp-ranks and with
// other engine kinds.
func TestDPRankFlag(t *testing.T) {
	host, _ := os.Hostname()
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	for _, c := range []struct {
		args []string
		id   string
		err  string
	}{
		{[]string{"--dp-rank", "3"}, host + "-bridge-dp3", ""},
		{[]string{"--dp-rank", "0", "--id", "gpu7"}, "gpu7", ""},
		{nil, host + "-bridge", ""},
		{[]string{"--dp-rank", "2", "--dp-ranks", "2"}, "", "not with --dp-ranks"},
		{[]string{"--dp-rank", "1", "--engine-kind", "sglang"}, "", "--engine-kind vllm"},
		{[]string{"--dp-rank", "-2"}, "", "a rank is 0 or more"},
	} {
		cfg, err := parseFlags(append(append([]string{}, base...), c.args...), io.Discard)
		switch {
		case c.err == "" && (err != nil || cfg.id != c.id):
			t.Errorf("%q: %v, %+v", c.args, err, cfg)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want %q", c.args, err, c.err)
		}
	}
}
