package main

import (
	"testing"

	"github.com/kvgate/kvgate/perf/leaktest"
)

// TestMain fails the run if a test leaves a goroutine behind; the tests'
// fake llama.cpp servers and the client's idle connections are closed by
// each test.
func TestMain(m *testing.M) { leaktest.Main(m) }
