package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// loraFlags are the flags of adapters loaded at run time (vLLM only).
type loraFlags struct {
	// adapters are the --lora-adapter NAME=SOURCE ones; their names are in
	// config.loras too, with their wire ids.
	adapters  []vllm.Adapter
	maxLoRAs  int
	loraEvery time.Duration
	slotsSet  bool // --max-loras given
}

// registerLoRA binds --lora-adapter, --max-loras and --lora-interval.
func (c *config) registerLoRA(fs *flag.FlagSet) {
	fs.Func("lora-adapter", "an adapter the bridge loads on vLLM when a request needs it: NAME=SOURCE, SOURCE being vLLM's lora_path (repeatable; announced to routers with the --lora adapters, ids counting on). vLLM must run with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora", func(s string) error {
		name, src, ok := strings.Cut(s, "=")
		if !ok || name == "" || src == "" {
			return fmt.Errorf("%q: want NAME=SOURCE", s)
		}
		for _, l := range c.loras {
			if l.Name == name {
				return fmt.Errorf("adapter %q given twice", name)
			}
		}
		id := uint32(len(c.loras) + 1)
		c.loras = append(c.loras, vllm.LoRA{Name: name, WireID: id})
		c.adapters = append(c.adapters, vllm.Adapter{Name: name, WireID: id, Source: src})
		return nil
	})
	fs.Func("max-loras", "the engine's adapter slots, as vLLM's --max-loras (default: vLLM's own where its metrics at start say, vllm:lora_requests_info, else 1, vLLM's default): the bridge keeps at most this many registered, unloading the least recently used idle one to load another, and announces residency to routers (ADAPTERS)", func(s string) error {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || n > 0xffff {
			return fmt.Errorf("%q: want 1..65535", s)
		}
		c.maxLoRAs, c.slotsSet = n, true
		return nil
	})
	fs.DurationVar(&c.loraEvery, "lora-interval", 2*time.Second, "how often the engine's registered adapters are read from /v1/models (an engine restarted without its runtime adapters, one loaded by another client)")
}

// residencyOn reports whether the bridge manages adapter residency.
func (c *config) residencyOn() bool { return len(c.adapters) > 0 || c.slotsSet }

// residentAdapters is every adapter the bridge serves, --lora ones (no
// source: never unloaded) and --lora-adapter ones.
func (c *config) residentAdapters() []vllm.Adapter {
	var out []vllm.Adapter
	for _, l := range c.loras {
		a := vllm.Adapter{Name: l.Name, WireID: l.WireID}
		for _, s := range c.adapters {
			if s.WireID == l.WireID {
				a.Source = s.Source
			}
		}
		out = append(out, a)
	}
	return out
}

// newResidency makes the residency of the vLLM engine e, or nil. Without
// --max-loras the slots are vLLM's own where its metrics at start (em, nil
// for none) say, else vLLM's default, 1; a --max-loras other than vLLM's
// is logged.
func (c *config) newResidency(e *vllm.Engine, em *vllm.EngineMetrics) *vllm.Residency {
	if !c.residencyOn() {
		return nil
	}
	slots := max(c.maxLoRAs, 1)
	switch {
	case em == nil || em.MaxLoRAs == 0:
	case !c.slotsSet:
		slots = em.MaxLoRAs
	case em.MaxLoRAs != c.maxLoRAs:
		e.Log.Warn("--max-loras is not the engine's: the bridge keeps to the flag", "max_loras", c.maxLoRAs, "engine_max_loras", em.MaxLoRAs)
	}
	return vllm.NewResidency(c.engineURL, e.Client, c.model, slots, c.dpRanks, c.residentAdapters(), e.Log)
}
