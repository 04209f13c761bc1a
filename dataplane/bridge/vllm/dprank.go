package vllm

import (
	"fmt"
	"strconv"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// DPRankHeader carries a request's data-parallel rank to vLLM's OpenAI
// server: OpenAIServing._get_data_parallel_rank reads it (an integer;
// anything else is "no rank") in vllm/entrypoints/openai/engine/serving.py,
// and OpenAIServingCompletion.create_completion passes it on as
// engine_client.generate(..., data_parallel_rank=...) in
// vllm/entrypoints/openai/completion/serving.py (vLLM at commits
// 619e4b31da7791a6ea4f6724fe45b54556b5a8fa and
// cc139d8ea6ff4db984778a3e77e95e1d1c7f1362). With internal load balancing
// (one API server for --data-parallel-size ranks) the named rank's engine
// core runs the request, bypassing vLLM's own least-loaded choice.
const DPRankHeader = "X-data-parallel-rank"

// rankOf checks a GENERATE's rank against the engine's ranks and returns
// the rank to name to the engine, or -1 for none: "any rank", or an engine
// of one rank (with vLLM's external load balancing each rank has its own
// API server and bridge, and the endpoint is the rank).
func (e *Engine) rankOf(g *wire.Generate) (int, error) {
	ranks := max(e.DPRanks, 1)
	switch {
	case g.DPRank == wire.AnyRank:
		return -1, nil
	case int(g.DPRank) >= ranks:
		return -1, &serve.StreamError{Code: wire.CodeBadRequest, Message: fmt.Sprintf("data-parallel rank %d: the engine has %d", g.DPRank, ranks)}
	case ranks == 1:
		return -1, nil
	}
	return int(g.DPRank), nil
}

// setRank names rank (unless -1) in a request to vLLM.
func setRank(h interface{ Set(string, string) }, rank int) {
	if rank >= 0 {
		h.Set(DPRankHeader, strconv.Itoa(rank))
	}
}

// ExternalRankMetrics is what a bridge in front of one rank of vLLM's
// external data parallelism reads of its engine's metrics: with
// --data-parallel-external-lb (or hybrid load balancing) every rank runs
// its own API server, started with its --data-parallel-rank, and the bridge
// in front of it presents the rank as an engine of one rank; the server's
// series are labelled with that rank, so rank first's metrics become the
// bridge's rank 0 (a server that labels its only rank otherwise still has
// its one rank taken). m is returned as it is for first 0.
func ExternalRankMetrics(m map[int]*EngineMetrics, first int) map[int]*EngineMetrics {
	if first == 0 {
		return m
	}
	if em, ok := m[first]; ok {
		return map[int]*EngineMetrics{0: em}
	}
	if len(m) == 1 {
		for _, em := range m {
			return map[int]*EngineMetrics{0: em}
		}
	}
	return nil
}
