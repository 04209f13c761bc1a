package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// TestParseRole: --role and the KV link flags reach the rank's Disagg, the
// default is both over sim's default link, and a role kvgate-sim does not
// have is refused by name.
func TestParseRole(t *testing.T) {
	cfg, _, _, err := parseFlags(nil, io.Discard)
	if err != nil || cfg.Rank.Disagg.Role != wire.RoleBoth || cfg.Rank.Disagg.Link != sim.DefaultKVLink {
		t.Fatalf("defaults: %+v, %v", cfg.Rank.Disagg, err)
	}
	cfg, _, _, err = parseFlags([]string{"--role", "decode", "--kv-link-bandwidth", "50", "--kv-link-latency", "3ms"}, io.Discard)
	if err != nil || cfg.Rank.Disagg != (sim.Disagg{Role: wire.RoleDecode, Link: sim.TierLink{GBps: 50, Latency: 3 * time.Millisecond}}) {
		t.Fatalf("--role decode: %+v, %v", cfg.Rank.Disagg, err)
	}
	if _, _, _, err := parseFlags([]string{"--role", "prefiller"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--role") {
		t.Fatalf("--role prefiller: %v", err)
	}
	if _, _, _, err := parseFlags([]string{"--role", "decode", "--kv-link-bandwidth", "0"}, io.Discard); err == nil {
		t.Fatal("a KV link of 0 GB/s was taken")
	}
}
