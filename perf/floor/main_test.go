package floor

import (
	"testing"

	"github.com/kvgate/kvgate/perf/leaktest"
)

// TestMain fails the run if a test leaves a goroutine behind: a proxy's
// event loops, workers and upstream stop with it.
func TestMain(m *testing.M) { leaktest.Main(m) }
