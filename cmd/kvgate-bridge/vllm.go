package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/bridge/llamacpp"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// vllmBridge is a vLLM or SGLang engine's bridge and its KV event
// subscribers, one per data-parallel rank.
type vllmBridge struct {
	*vllm.Bridge
	c    *config
	subs []*vllm.Subscriber
	log  *slog.Logger
	// lowerTiers are the CPU and disk capacities announced at the handshake.
	lowerTiers []wire.TierCapacity
}

// startVLLM makes the vLLM (or SGLang) bridge. An engine that says it is
// llama.cpp's server is refused (its /v1/completions sends no token ids);
// a vLLM that does not answer yet is not waited for, as before: vLLM may
// be loading. An SGLang server is checked first (connectSGLang).
func startVLLM(ctx context.Context, c *config, h *kvstore.Hasher, log *slog.Logger) (backend, error) {
	e := vllm.NewEngine(c.engineURL, c.model, nil, log)
	e.DPRanks = c.dpRanks
	c.disagg(e)
	c.vision(e)
	first := max(c.dpRank, 0) // the engine's rank that is the bridge's rank 0
	capacity := c.gpuBlocks
	if c.engineKind == kindSGLang {
		s, err := connectSGLang(ctx, c, e.Client, log)
		if err != nil {
			return nil, err
		}
		e.SGLang = s
		if capacity == 0 {
			capacity = s.MaxTotalNumTokens / uint64(c.blockSize)
		}
	} else {
		ictx, icancel := context.WithTimeout(ctx, 3*time.Second)
		kind, why, _ := llamacpp.Identify(ictx, e.Client, c.engineURL)
		icancel()
		if kind == llamacpp.KindLlamaCpp {
			return nil, fmt.Errorf("%w: --engine-kind vllm, but the engine at %s is llama.cpp's server (%s), whose OpenAI API sends no token ids: run kvgate-bridge with --engine-kind llamacpp",
				errRefused, c.engineURL, why)
		}
		if c.maxModelLen == 0 {
			mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
			n, err := vllm.FetchMaxModelLen(mctx, e.Client, c.engineURL, c.model)
			mcancel()
			if err != nil {
				log.Info("the engine's context is not known (give --max-model-len to announce it); routers leave long prompts to the engine", "engine", c.engineURL, "err", err)
			}
			c.maxModelLen = n
		}
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		if s, err := vllm.FetchSGLangServer(sctx, e.Client, c.engineURL); err == nil {
			log.Warn("the engine is SGLang: run kvgate-bridge with --engine-kind sglang (through its OpenAI API only recent versions send token ids, cached tokens need --enable-cache-report, and adapters are not named as vLLM names them)",
				"engine", c.engineURL, "version", s.Version)
		}
		scancel()
	}
	names := map[uint32]string{}
	for _, l := range c.loras {
		names[l.WireID] = l.Name
	}
	e.LoRAs = names
	var startMetrics *vllm.EngineMetrics // for the GPU's, vLLM's offloading and adapter slot sizes
	if capacity == 0 || c.cpuBlocks == 0 && c.blockBytes > 0 || c.residencyOn() && !c.slotsSet {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		if m, err := vllm.ScrapeMetrics(sctx, e.Client, c.metricsURL); err == nil {
			startMetrics = vllm.ExternalRankMetrics(m, first)[0]
		}
		scancel()
	}
	if capacity == 0 && startMetrics != nil {
		capacity = startMetrics.GPUBlocks
	}
	e.Residency = c.newResidency(e, startMetrics)
	if e.Residency != nil {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		if err := e.Residency.Sync(sctx); err != nil {
			log.Info("the engine's adapters are not known yet; they are read again every --lora-interval", "engine", c.engineURL, "err", err)
		}
		scancel()
	}
	t := vllm.NewTranslator(h, c.loras)
	t.OffloadBlockSize = c.offloadBlockSize
	t.SetGroups(c.groups)
	vb := &vllmBridge{Bridge: vllm.NewBridge(e, t, c.dpRanks, capacity), c: c, log: log}
	vb.FirstRank = first
	vb.Tiers = c.tiers
	vb.lowerTiers = c.tiers.Capacities(startMetrics)
	if c.kvEvents != "" {
		for r := range c.dpRanks {
			ep, err := vllm.RankEndpoint(c.kvEvents, first+r)
			if err != nil {
				return nil, err
			}
			replay, err := vllm.RankEndpoint(c.replay, first+r)
			if err != nil {
				return nil, err
			}
			vb.subs = append(vb.subs, &vllm.Subscriber{Endpoint: ep, ReplayEndpoint: replay, Topic: c.kvTopic, Log: log.With("rank", r),
				Batch: func(_ uint64, batch *vllm.Batch) { vb.Events(r, batch) },
				Lost:  func(reason string) { vb.Lost(r, reason) }})
		}
	}
	return vb, nil
}

func (vb *vllmBridge) handshake() wire.Handshake {
	hs := vb.c.handshake(vb.Capacity)
	hs.Tiers = append(hs.Tiers, vb.lowerTiers...)
	hs.TierCosts = vb.Tiers.Costs() // sent only to routers that read it (wire.AcceptHandshake)
	hs.Features |= vb.Features()    // vLLM: the sampling section (and images: --multimodal); SGLang: none
	hs.Features |= vb.Disagg.Features()
	if vb.Residency != nil {
		hs.Features |= wire.FeatureAdapters // adapters loaded at run time, residency in ADAPTERS
	}
	for _, l := range vb.c.loras {
		hs.LoRAs = append(hs.LoRAs, wire.LoRA{ID: l.WireID, Name: l.Name})
	}
	if hs.Groups = vb.c.groups; hs.Groups != nil {
		hs.Features |= wire.FeatureHybridGroups // sent only to routers that ask (wire.AcceptHandshake)
	}
	return hs
}

func (vb *vllmBridge) setOut(srv *serve.Server) {
	vb.Out = srv
	if vb.Residency != nil {
		vb.Residency.Announce = func(m *wire.Adapters) { srv.BroadcastIf(wire.FeatureAdapters, m) }
	}
}

func (vb *vllmBridge) collectors(routers func() int) []prometheus.Collector {
	cs := append(vllm.Collectors(vb.Bridge, vb.subs, routers), vllm.SubscriberCollectors(vb.subs)...)
	return append(cs, vllm.DisaggCollectors(vb.Engine)...)
}

func (vb *vllmBridge) run(ctx context.Context) {
	go vb.PollLoad(ctx, vb.c.metricsURL, vb.c.metricsEvery)
	if vb.Residency != nil {
		go vb.Residency.Poll(ctx, vb.c.loraEvery)
	}
	for r, sub := range vb.subs {
		go func() {
			if err := sub.Run(ctx); err != nil {
				vb.log.Error("KV event subscriber stopped", "rank", r, "err", err)
			}
		}()
	}
}
