package gateway

import (
	"testing"

	"github.com/kvgate/kvgate/perf/leaktest"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// gateway's tests start engines, a pool and an HTTP server.
func TestMain(m *testing.M) { leaktest.Main(m) }
