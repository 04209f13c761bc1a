// Package sim is kvgate's simulated inference engine: a continuous-batching
// scheduler per data-parallel rank with a paged KV cache, prefix caching,
// LRU eviction into optional CPU and disk tiers (loaded back at each tier's
// bandwidth and latency, TierLink), and a timing model of prefill and
// decode (Profile) that can run faster than real time (Config.Speed). It
// speaks the real wire protocol through wire/serve (Server), sends precise
// KV events, LOAD reports and snapshots, so every router test and benchmark
// meets an engine that behaves like vLLM's scheduler without a GPU.
//
// StartLocal runs a fleet of them on loopback: it is kvgate's embedded
// default (--sim-engines) and the only perf/ package production code may
// import.
package sim
