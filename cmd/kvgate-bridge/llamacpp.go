package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/bridge/llamacpp"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// llamaBridge is a llama.cpp server's bridge.
type llamaBridge struct {
	*llamacpp.Bridge
	c       *config
	slotCtx int // one slot's context: the longest request the server takes
}

// startLlamaCpp checks the server (retrying one that does not answer yet,
// for --connect-timeout) and makes its bridge; a server that differs from
// the flags is refused with the error saying how.
func startLlamaCpp(ctx context.Context, c *config, h *kvstore.Hasher, log *slog.Logger) (backend, error) {
	tok, tokName, err := tokenize.Open(c.tokenizerDir)
	if err != nil {
		return nil, err
	}
	e := llamacpp.NewEngine(c.engineURL, c.model, llamacpp.NewPieces(tok), log)
	s, err := llamacpp.Connect(ctx, e.Client, llamacpp.Spec{URL: c.engineURL, Model: c.model, Tokenizer: tok}, c.connectTimeout, log)
	if llamacpp.Refused(err) || errors.Is(err, llamacpp.ErrSchema) {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	if err != nil {
		return nil, err
	}
	log.Info("llama.cpp server checked", "engine", c.engineURL, "build", s.Props.BuildInfo, "model", s.Props.ModelAlias,
		"slots", s.Slots(), "slot_context", s.SlotContext(), "tokenizer", tokName)
	return &llamaBridge{Bridge: llamacpp.NewBridge(e, h, s), c: c, slotCtx: s.SlotContext()}, nil
}

// handshake announces the server's slot context as the context (unless
// --max-model-len says otherwise): each
// request runs in one slot, so n_ctx / total_slots tokens (llama.cpp's
// n_ctx per slot, from /props) is the longest it takes.
func (lb *llamaBridge) handshake() wire.Handshake {
	hs := lb.c.handshake(lb.Capacity)
	if hs.MaxModelLen == 0 {
		hs.MaxModelLen = uint32(max(lb.slotCtx, 0))
	}
	return hs
}

func (lb *llamaBridge) setOut(srv *serve.Server) { lb.Out = srv }

func (lb *llamaBridge) collectors(routers func() int) []prometheus.Collector {
	return llamacpp.Collectors(lb.Bridge, routers)
}

func (lb *llamaBridge) run(ctx context.Context) { go lb.Poll(ctx, lb.c.slotsEvery, lb.c.metricsEvery) }
