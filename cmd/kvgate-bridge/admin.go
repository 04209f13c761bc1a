package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/admin"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire/serve"
)

// serveAdmin runs /metrics and /debug/pprof/ on addr: the KV events the
// bridge received, replayed and could not translate.
func serveAdmin(addr string, b *vllm.Bridge, subs []*vllm.Subscriber, srv *serve.Server) (string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(vllm.Collectors(b, subs, srv.Routers)...)
	a := admin.NewServer(reg)
	if err := a.Listen(addr); err != nil {
		return "", err
	}
	return a.Addr(), nil
}
