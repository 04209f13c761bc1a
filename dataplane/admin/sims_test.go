package admin

import (
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
)

// simEnginePool starts one simulated engine of cfg on loopback and a pool
// connected to it, the engine ready.
func simEnginePool(t *testing.T, cfg sim.Config) *engine.Pool {
	t.Helper()
	_, addr := simtest.Serve(t, cfg)
	return simtest.Pool(t, engine.DefaultConfig(), kvstore.New(kvstore.Options{}), addr)
}
