package main

import (
	"flag"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// engineFlags configure the health of the router's engine connections
// (dataplane/engine, Config and health.go).
type engineFlags struct {
	pingInterval, pingTimeout, dropAfter, tokenTimeout, writeTimeout time.Duration
}

func (f *engineFlags) register(fs *flag.FlagSet) {
	def := engine.DefaultConfig()
	fs.DurationVar(&f.pingInterval, "engine-ping-interval", def.PingInterval, "how often each engine is PINGed")
	fs.DurationVar(&f.pingTimeout, "engine-ping-timeout", def.PingTimeout, "an engine that sends nothing, not even PONG, this long after a PING is not ready (its requests without a token yet are re-routed, the others end with an error) until it answers again")
	fs.DurationVar(&f.dropAfter, "engine-drop-after", def.DropAfter, "an engine silent this long after a PING is disconnected and redialed")
	fs.DurationVar(&f.tokenTimeout, "engine-token-timeout", def.TokenTimeout, "a stream that has started and then gets no token for this long ends with an error (0: no limit)")
	fs.DurationVar(&f.writeTimeout, "engine-write-timeout", def.WriteTimeout, "bound on each write to an engine; a write that takes longer ends the connection")
}

// apply sets the flags' values in a pool configuration.
func (f *engineFlags) apply(cfg *engine.Config) {
	cfg.PingInterval, cfg.PingTimeout, cfg.DropAfter = f.pingInterval, f.pingTimeout, f.dropAfter
	cfg.TokenTimeout, cfg.WriteTimeout = f.tokenTimeout, f.writeTimeout
}

// check refuses values the pool cannot run with (also for --check-config).
func (f *engineFlags) check() error {
	cfg := engine.DefaultConfig()
	f.apply(&cfg)
	return cfg.Validate()
}
