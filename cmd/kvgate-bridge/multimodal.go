package main

import (
	"flag"
	"fmt"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
)

// mmFlags are the flags of vision models (vLLM only).
type mmFlags struct {
	multimodal  bool
	renderCache int
}

// registerMultimodal binds --multimodal.
func (c *config) registerMultimodal(fs *flag.FlagSet) {
	fs.BoolVar(&c.multimodal, "multimodal", false, "the engine serves a vision model: announce MULTIMODAL and forward GENERATEs with images through vLLM's /v1/chat/completions/render and /inference/v1/generate (the images' uuids kvgate's content ids); vLLM's /v1/models does not say whether a model takes images")
	fs.IntVar(&c.renderCache, "multimodal-cache-bytes", 256<<20, "--multimodal: bytes of processed images kept from vLLM's render, so a conversation's later turns do not render its images again (0: none)")
}

// checkMultimodal refuses --multimodal for engines the bridge sends no
// images to, and with a role that hands requests off.
func (c *config) checkMultimodal() error {
	switch {
	case !c.multimodal:
		return nil
	case c.engineKind != kindVLLM:
		return fmt.Errorf("--multimodal: only with --engine-kind vllm (the bridge forwards images through vLLM's render and tokens-in endpoints)")
	case c.role != wire.RoleBoth:
		return fmt.Errorf("--multimodal: not with --role %v (prefill/decode hand-offs carry no images)", c.role)
	case c.renderCache < 0:
		return fmt.Errorf("--multimodal-cache-bytes %d: must not be negative", c.renderCache)
	}
	return nil
}

// vision tells the engine whether it serves a vision model, and gives it
// its cache of processed images.
func (c *config) vision(e *vllm.Engine) {
	e.Multimodal = c.multimodal
	if c.multimodal && c.renderCache > 0 {
		e.Renders = vllm.NewRenderCache(c.renderCache)
	}
}
