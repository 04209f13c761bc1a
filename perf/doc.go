// Package perf has no code of its own: its sub-packages are what kvgate is
// measured and tested end to end with.
//
//   - sim: the simulated engine (continuous batching over a paged,
//     prefix-cached KV cache, with a timing model), served over the wire
//     protocol; behind kvgate-sim and kvgate --sim-engines, the one perf
//     package that production code imports.
//   - workload: workload specs turned into request schedules (Mooncake and
//     Azure traces; shared-prefix, multi-turn and agentic generators).
//   - loadgen: the open-loop load generator and its client-side latency
//     measurements.
//   - cluster: a discrete-event simulation of many engines and router
//     replicas in virtual time, with the real index and cost function.
//   - report: the JSON, Markdown and SVG plots of a comparison.
//   - cpustat: CPU time from /proc, for benchmarks.
//   - e2e: end-to-end tests that run the built binaries (build tag e2e).
//   - arch: the test that keeps the project's import arrows one way.
//
// kvgate-bench drives workload, loadgen, cluster and report. RESULTS.md in
// this directory records every measured number with the command that
// produced it; results/ holds the reports it cites and scripts/ the
// experiments run from the shell.
package perf
