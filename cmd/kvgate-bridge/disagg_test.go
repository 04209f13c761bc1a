package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
)

// TestRoleFlag: --role is both by default and announces nothing; prefill
// and decode announce their role's features (wire.EngineRole.Features)
// and reach the engine with --kv-keep-timeout; another role, a role with
// an engine kind that serves no hand-off, or a keep timeout of 0 are
// refused by name.
func TestRoleFlag(t *testing.T) {
	base := []string{"--engine-url", "http://127.0.0.1:1", "--model", "m"}
	for _, c := range []struct {
		args []string
		role wire.EngineRole
		keep time.Duration
	}{
		{nil, wire.RoleBoth, vllm.DefaultKeepTimeout},
		{[]string{"--role", "prefill", "--kv-keep-timeout", "30s"}, wire.RolePrefill, 30 * time.Second},
		{[]string{"--role", "decode"}, wire.RoleDecode, vllm.DefaultKeepTimeout},
	} {
		cfg, err := parseFlags(append(append([]string{}, base...), c.args...), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		e := vllm.NewEngine(cfg.engineURL, cfg.model, nil, nil)
		cfg.disagg(e)
		vb := &vllmBridge{Bridge: vllm.NewBridge(e, vllm.NewTranslator(nil, nil), 1, 64), c: cfg}
		roleBits := wire.FeatureDisagg | wire.FeatureKVTransfer | wire.FeaturePrefillOnly | wire.FeatureDecodeOnly
		if hs := vb.handshake(); e.Disagg.Role != c.role || e.Disagg.KeepTimeout != c.keep || hs.Features&roleBits != c.role.Features() {
			t.Errorf("%q: role %v keep %v, features %#x", c.args, e.Disagg.Role, e.Disagg.KeepTimeout, uint32(vb.handshake().Features))
		}
		if n := len(vllm.DisaggCollectors(e)); (n > 0) != (c.role != wire.RoleBoth) {
			t.Errorf("%q: %d hand-off metrics", c.args, n)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "router"}, `engine role "router"`},
		{[]string{"--role", "prefill", "--engine-kind", "llamacpp"}, "only with --engine-kind vllm"},
		{[]string{"--role", "decode", "--engine-kind", "sglang"}, "only with --engine-kind vllm"},
		{[]string{"--kv-keep-timeout", "0s"}, "must be positive"},
	} {
		if _, err := parseFlags(append(append([]string{}, base...), bad.args...), io.Discard); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.args, err, bad.want)
		}
	}
}
