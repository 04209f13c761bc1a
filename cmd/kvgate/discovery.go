package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/discovery"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/syncring"
)

// discoveryFlags say where engines are found besides --engine, how a
// leaving engine drains, and the admin API's token (dataplane/discovery,
// dataplane/admin/engineapi.go).
type discoveryFlags struct {
	dnsSpecs                   []string
	file, tokenFile            string
	dnsEvery, fileEvery        time.Duration
	drainTimeout, snapshotWait time.Duration
	dns                        []*discovery.DNS
	token                      []byte
}

func (f *discoveryFlags) register(fs *flag.FlagSet) {
	def := engine.DefaultConfig()
	fs.Func("engine-dns", "engines under a DNS name, NAME:PORT (A/AAAA records, each at PORT) or NAME (SRV records give hosts and ports), re-resolved every --engine-dns-interval (an engine leaves once two answers in a row lack it): a Kubernetes headless Service (repeatable, or comma-separated)", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f.dnsSpecs = append(f.dnsSpecs, s)
			}
		}
		return nil
	})
	fs.DurationVar(&f.dnsEvery, "engine-dns-interval", 5*time.Second, "how often --engine-dns names are resolved again")
	fs.StringVar(&f.file, "engine-file", "", "file of engine addresses, HOST:PORT one a line (# comments), read again every --engine-file-interval; replace it whole (write, then rename)")
	fs.DurationVar(&f.fileEvery, "engine-file-interval", time.Second, "how often --engine-file is read again")
	fs.StringVar(&f.tokenFile, "admin-token-file", "", "file holding the bearer token of the admin API's engine changes (POST/DELETE /admin/engines); without it they are refused")
	fs.DurationVar(&f.drainTimeout, "engine-drain-timeout", def.DrainTimeout, "how long a drained or removed engine's open streams may finish before they end with an error")
	fs.DurationVar(&f.snapshotWait, "engine-snapshot-wait", def.SnapshotWait, "how long a new engine that sends snapshots waits for its snapshot before taking requests")
}

// any reports whether engines may come from discovery or the admin API.
func (f *discoveryFlags) any() bool { return len(f.dnsSpecs) > 0 || f.file != "" || f.tokenFile != "" }

// sources names where engines may come from besides --engine.
func (f *discoveryFlags) sources() []string {
	out := append([]string(nil), f.dnsSpecs...)
	if f.file != "" {
		out = append(out, f.file)
	}
	if f.tokenFile != "" {
		out = append(out, discovery.SourceAdmin)
	}
	return out
}

// check parses the DNS names, reads the engine file and the token once
// (also for --check-config).
func (f *discoveryFlags) check() error {
	if f.dnsEvery <= 0 || f.fileEvery <= 0 || f.drainTimeout <= 0 || f.snapshotWait <= 0 {
		return errors.New("--engine-dns-interval, --engine-file-interval, --engine-drain-timeout and --engine-snapshot-wait must be positive")
	}
	f.dns = f.dns[:0]
	for _, s := range f.dnsSpecs {
		d, err := discovery.ParseDNS(s)
		if err != nil {
			return err
		}
		d.Every = f.dnsEvery
		f.dns = append(f.dns, d)
	}
	if f.file != "" {
		if _, err := discovery.ReadEngineFile(f.file); err != nil {
			return fmt.Errorf("--engine-file: %w", err)
		}
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		if f.token = []byte(strings.TrimSpace(string(b))); len(f.token) == 0 {
			return fmt.Errorf("--admin-token-file %s is empty: refusing to start with an admin API anyone could use", f.tokenFile)
		}
	}
	return nil
}

// apply sets the drain and snapshot bounds in a pool configuration.
func (f *discoveryFlags) apply(cfg *engine.Config) {
	cfg.DrainTimeout, cfg.SnapshotWait = f.drainTimeout, f.snapshotWait
}

// discoveryRun is the daemon's running discovery and ring-key follower.
type discoveryRun struct {
	*discovery.Discovery
	cancel context.CancelFunc
	done   chan struct{}
}

// startDiscovery watches the DNS names and the engine file, and hands the
// ring (when there is one) the engines' keys as they change.
func startDiscovery(f *discoveryFlags, pool *engine.Pool, ring *syncring.Ring, log *slog.Logger) *discoveryRun {
	ctx, cancel := context.WithCancel(context.Background())
	run := &discoveryRun{Discovery: discovery.New(pool, log), cancel: cancel, done: make(chan struct{})}
	var sources []discovery.Source
	for _, d := range f.dns {
		d.Log = log
		sources = append(sources, d)
	}
	if f.file != "" {
		sources = append(sources, &discovery.File{Path: f.file, Every: f.fileEvery, Log: log})
	}
	run.Start(ctx, sources...)
	go func() {
		defer close(run.done)
		if ring != nil {
			discovery.FollowPool(ctx, pool, ring)
		}
		run.Wait()
	}()
	return run
}

func (r *discoveryRun) close() {
	r.cancel()
	<-r.done
}
