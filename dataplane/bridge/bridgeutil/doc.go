// Package bridgeutil is what kvgate-bridge's engine adapters (vllm,
// llamacpp) share: reading an engine's server-sent events, the table of
// running requests that CANCEL reaches, HTTP statuses as wire error codes,
// Prometheus text samples, and SNAPSHOT frames cut into chunks. It holds no
// state of its own; each adapter owns its tables and says which goroutine
// or lock guards them.
package bridgeutil
