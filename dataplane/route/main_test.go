package route

import (
	"testing"

	"github.com/kvgate/kvgate/perf/leaktest"
)

// TestMain fails the run if a test or benchmark leaves a goroutine behind
// (the parallel routing benchmarks' workers, the engine pools they dial).
func TestMain(m *testing.M) { leaktest.Main(m) }
