// Package arch is kvgate's architecture test: it fails when an import
// arrow between the project's packages points the wrong way. It has no
// code outside its test file, so nothing can depend on it; the rules and
// their checker live in arch_test.go, a table test shows that each rule
// catches what it forbids, and TestTree runs them on the packages that
// `go list -json ./...` reports.
//
// The rules apply to non-test imports (go list's Imports, not TestImports
// or XTestImports): a package's own tests may import what they need.
// Paths are relative to the module root.
//
//   - wire imports nothing of the project; the packages under wire/
//     (wire/serve, wire/serve/servetest) import wire only.
//   - kvstore imports nothing of the project.
//   - syncring imports wire at most.
//   - Nothing outside cmd/ imports cmd/....
//   - Production packages do not import perf/..., with one exception:
//     perf/sim, the simulated engine behind `kvgate --sim-engines` and the
//     kvgate-sim binary. Production is every package outside perf/ except
//     cmd/kvgate-bench (the benchmarking tool, which may import any of
//     perf/), and perf/sim itself, since production code imports it: so
//     perf/sim may not pull in the rest of perf/.
//   - Test helpers (packages whose name ends in "test", in the style of
//     net/http/httptest: wire/serve/servetest,
//     dataplane/bridge/vllm/vllmtest) are not imported by the non-test
//     code of production packages other than test helpers.
//
// Each violation is reported as the arrow and the rule it breaks.
package arch
