// Package perf will hold the engine simulator model, workloads and trace
// replay, the load generator, the cluster simulation and report plots used by
// kvgate-sim and kvgate-bench. RESULTS.md in this directory records every
// measured number with the command that produced it.
package perf
