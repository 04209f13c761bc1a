package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/admin"
)

// serveAdmin runs /metrics and /debug/pprof/ on addr with the bridge's
// collectors (its adapter's: KV events, blocks, routers).
func serveAdmin(addr string, collectors []prometheus.Collector) (string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	a := admin.NewServer(reg)
	if err := a.Listen(addr); err != nil {
		return "", err
	}
	return a.Addr(), nil
}
