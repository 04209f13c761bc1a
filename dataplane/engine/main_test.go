package engine

import (
	"testing"

	"github.com/kvgate/kvgate/perf/leaktest"
)

// TestMain fails the run if a test leaves a goroutine behind: an engine's
// connection loop, reader and keep-alive must all end with Pool.Close.
func TestMain(m *testing.M) { leaktest.Main(m) }
