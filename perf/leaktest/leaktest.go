// Package leaktest is the goroutine-leak check of kvgate's tests: goleak,
// told which goroutines the libraries on the design card keep for the
// life of a process, so that only a test's own leftovers fail a run.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// kept are the goroutines that outlive any test by design.
var kept = []goleak.Option{
	// cloudwego/netpoll starts its pollers with the first connection and
	// keeps them for the life of the process.
	goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
	// gnet makes its default goroutine pool, an ants pool, when its package
	// initialises; the pool's housekeeping goroutines live for the process.
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
}

// Main runs a package's tests from its TestMain and fails the run if they
// leave a goroutine behind, other than those the libraries keep and
// those extra ignores.
func Main(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, Options(extra...)...)
}

// Options are goleak's options that ignore the goroutines the libraries
// keep, and extra.
func Options(extra ...goleak.Option) []goleak.Option {
	return append(append([]goleak.Option(nil), extra...), kept...)
}
