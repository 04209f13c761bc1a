package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// ringFlags configure this replica's part in the replica ring (syncring).
type ringFlags struct {
	id, listen, peers, secretFile, secretFlag, compress string
	interval, heartbeat, deadAfter                      time.Duration
	broadcast                                           bool
	secret                                              []byte
}

func (f *ringFlags) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	def := syncring.DefaultConfig()
	fs.StringVar(&f.id, "replica-id", host, "this replica's id in the ring (unique; the ring is ordered by it)")
	fs.StringVar(&f.listen, "ring-listen", "", "ring address HOST:PORT; empty: no ring, this replica routes alone")
	fs.StringVar(&f.peers, "peers", "", "comma-separated ring addresses of the other replicas; a DNS name with several A/AAAA records (a headless Service) stands for all and is re-resolved")
	fs.StringVar(&f.secretFlag, "ring-secret", "", "shared secret peers must prove (visible in ps: prefer --ring-secret-file or $KVGATE_RING_SECRET)")
	fs.StringVar(&f.secretFile, "ring-secret-file", "", "file holding the ring secret")
	fs.DurationVar(&f.interval, "sync-interval", def.Interval, "how often the ring all-reduces engine load")
	fs.DurationVar(&f.heartbeat, "ring-heartbeat", def.Heartbeat, "heartbeat period between replicas")
	fs.DurationVar(&f.deadAfter, "ring-dead-after", def.DeadAfter, "silence after which a peer leaves the ring")
	fs.BoolVar(&f.broadcast, "ring-broadcast", true, "broadcast each routing decision's reservation to the peers at once")
	fs.StringVar(&f.compress, "ring-compress", "none", "compress ring frames: none, s2 or zstd (perf/RESULTS.md: does not pay)")
}

func (f *ringFlags) check(engines []string) error {
	if f.listen == "" {
		return nil
	}
	if len(engines) == 0 {
		return errors.New("--ring-listen needs --engine: replicas share engines; --sim-engines are private to one replica")
	}
	if f.id == "" {
		return errors.New("--replica-id is required with --ring-listen")
	}
	var err error
	if f.secret, err = loadSecret("KVGATE_RING_SECRET", f.secretFile, "--ring-secret-file"); err != nil {
		return err
	}
	if f.secretFlag != "" {
		f.secret = []byte(f.secretFlag)
	}
	if _, err := f.codec(); err != nil {
		return err
	}
	return nil
}

func (f *ringFlags) codec() (wire.Codec, error) {
	switch f.compress {
	case "none", "":
		return wire.CodecNone, nil
	case "s2":
		return wire.CodecS2, nil
	case "zstd":
		return wire.CodecZstd, nil
	}
	return 0, fmt.Errorf("--ring-compress %q: none, s2 or zstd", f.compress)
}

// startRing joins the ring (when configured) and makes the router count
// the peers' load.
func startRing(f *ringFlags, pool *engine.Pool, router *route.Router, index *kvstore.Index, log *slog.Logger) (*syncring.Ring, error) {
	if f.listen == "" {
		return nil, nil
	}
	cfg := syncring.DefaultConfig()
	cfg.ID, cfg.Listen, cfg.Secret, cfg.Source, cfg.Logger = f.id, f.listen, f.secret, router, log
	cfg.Interval, cfg.Heartbeat, cfg.DeadAfter = f.interval, f.heartbeat, f.deadAfter
	cfg.RoundTimeout = max(cfg.RoundTimeout, 20*f.interval)
	cfg.NoBroadcast = !f.broadcast
	cfg.Codec, _ = f.codec()
	for _, p := range strings.Split(f.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Peers = append(cfg.Peers, p)
		}
	}
	for _, e := range pool.Engines() {
		cfg.Engines = append(cfg.Engines, e.Addr)
	}
	cfg.Digest = func() []byte { return index.AppendEngineDigests(nil) }
	cfg.Similarity = kvstore.EngineDigestsSimilarity
	r, err := syncring.Start(cfg)
	if err != nil {
		return nil, err
	}
	router.SetFleet(r)
	return r, nil
}
