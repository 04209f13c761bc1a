package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/ebpf"
)

// startPassthrough sets up the HTTP engines (--http-engine) and the
// steering mode of their responses; nil when there are none.
func startPassthrough(c *config, log *slog.Logger) (*passthrough.Pool, error) {
	if len(c.httpEngines) == 0 {
		return nil, nil
	}
	steer, err := ebpf.Open(c.steering, log)
	if err != nil {
		return nil, err
	}
	p, err := passthrough.NewPool(c.httpEngines, steer, c.weights, log)
	if err != nil {
		steer.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitHealthy(ctx); err != nil {
		log.Warn("HTTP engines not all answering yet", "err", err)
	}
	p.Start(2 * time.Second)
	return p, nil
}
