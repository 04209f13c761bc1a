package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
)

// disaggFlags are the flags of prefill/decode disaggregation (vLLM only).
type disaggFlags struct {
	role   wire.EngineRole
	kvKeep time.Duration
}

// registerDisagg binds --role and --kv-keep-timeout.
func (c *config) registerDisagg(fs *flag.FlagSet) {
	fs.Func("role", "the engine's part in prefill/decode disaggregation: prefill (vLLM started with the NixlConnector as kv_producer: the bridge takes only prefill-side hand-offs), decode (kv_consumer: decode sides and ordinary requests) or both (no hand-offs)", func(s string) error {
		r, err := wire.ParseEngineRole(s)
		c.role = r
		return err
	})
	fs.DurationVar(&c.kvKeep, "kv-keep-timeout", vllm.DefaultKeepTimeout, "role prefill: the prefill vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, after which it frees a hand-off's blocks; a hand-off stream ends there even inside the router's deadline")
}

// checkDisagg refuses a role other than both for engines that serve no
// hand-off.
func (c *config) checkDisagg() error {
	if c.role != wire.RoleBoth && c.engineKind != kindVLLM {
		return fmt.Errorf("--role %v: only with --engine-kind vllm (the bridge drives vLLM's NixlConnector flow)", c.role)
	}
	if c.kvKeep <= 0 {
		return fmt.Errorf("--kv-keep-timeout %v: must be positive", c.kvKeep)
	}
	return nil
}

// disagg is the engine's part as the flags say.
func (c *config) disagg(e *vllm.Engine) {
	e.Disagg.Role, e.Disagg.KeepTimeout = c.role, c.kvKeep
}
