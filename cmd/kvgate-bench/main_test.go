package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind; the tests'
// fake llama.cpp servers and the client's idle connections are closed by
// each test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// cloudwego/netpoll (the engine pool of the hybrid command) starts its
		// pollers with the first connection and keeps them for the process.
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
		// gnet (the floor command's proxy, perf/floor) makes its default
		// goroutine pool, an ants pool, when its package initialises; the
		// pool's housekeeping goroutines live for the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}
