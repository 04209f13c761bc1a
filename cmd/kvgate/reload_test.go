package main

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
)

// keyRecorder is a keySetter that keeps what it was given.
type keyRecorder struct{ keys []map[string]bool }

func (k *keyRecorder) SetAPIKeys(keys map[string]bool) { k.keys = append(k.keys, keys) }

// TestReload: a reload applies the new API keys (the file's contents
// changed, its path did not), the log level and the --engine list (one
// added, one removed), refuses a flag that cannot change live, again at
// the next reload, leaves a flag the command line sets alone, and an
// invalid file changes nothing.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := write("keys", "old-key\n")
	conf := write("kvgate.conf", "engine=127.0.0.1:1,127.0.0.1:2\napi-key-file="+keys+"\nlog-level=info\nretries=2\n")
	c, err := parseFlags([]string{"--config", conf, "--max-model-len", "4096"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), c.engines)
	t.Cleanup(pool.Close)
	rec := &keyRecorder{}
	r := newReloader(c, rec, nil, pool, slog.New(slog.DiscardHandler))

	write("keys", "new-key\nother-key\n")
	write("kvgate.conf", "engine=127.0.0.1:2,127.0.0.1:3\napi-key-file="+keys+"\nlog-level=debug\nretries=5\nmax-model-len=8192\n")
	res, err := r.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--api-key-file", "--log-level", "--engine"}; !slices.Equal(res.Applied, want) {
		t.Fatalf("applied %v, want %v", res.Applied, want)
	}
	if want := []string{"--retries"}; !slices.Equal(res.Refused, want) {
		t.Fatalf("refused %v, want %v (max-model-len is on the command line)", res.Refused, want)
	}
	if len(rec.keys) != 1 || !maps.Equal(rec.keys[0], map[string]bool{"new-key": true, "other-key": true}) {
		t.Fatalf("API keys set: %v", rec.keys)
	}
	if c.logLevel.Level() != slog.LevelDebug || c.retries != 2 {
		t.Fatalf("log level %v, retries %d", c.logLevel.Level(), c.retries)
	}
	for _, addr := range []string{"127.0.0.1:2", "127.0.0.1:3"} {
		if e, ok := pool.Lookup(addr); !ok || e.State() == engine.StateDrained {
			t.Errorf("engine %s: in the pool %v", addr, ok)
		}
	}
	// The removed engine (no stream open) retires: drained, then gone.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if e, ok := pool.Lookup("127.0.0.1:1"); !ok || e.State() == engine.StateDrained {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine taken out of --engine is still in the pool after a minute")
		}
	}

	// Nothing new: the refused flag is refused again, nothing is applied.
	if res, err = r.reload("test"); err != nil || len(res.Applied) != 0 || !slices.Equal(res.Refused, []string{"--retries"}) {
		t.Fatalf("second reload: %+v %v", res, err)
	}
	// An invalid file: an error, and the configuration in force stays.
	write("kvgate.conf", "engine=127.0.0.1:9\nlog-level=loud\n")
	if _, err := r.reload("test"); err == nil || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("invalid file: %v", err)
	}
	if c.logLevel.Level() != slog.LevelDebug || len(rec.keys) != 1 || !slices.Equal(c.engines, []string{"127.0.0.1:2", "127.0.0.1:3"}) {
		t.Fatalf("an invalid file changed something: level %v, keys %v, engines %v", c.logLevel.Level(), rec.keys, c.engines)
	}
}

// TestReloadWeights: a reload puts the file's new routing weights in force
// on a live router, a value the command line sets is left alone, and
// weights the router refuses keep those in force.
func TestReloadWeights(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "kvgate.conf")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("engine=127.0.0.1:1\nprefill-rate=66\ndecode-weight=0.05\n")
	c, err := parseFlags([]string{"--config", conf, "--tie-fraction", "0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), c.engines)
	t.Cleanup(pool.Close)
	router := route.New(pool, route.PolicyKV, c.weights)
	r := newReloader(c, &keyRecorder{}, router, pool, slog.New(slog.DiscardHandler))

	write("engine=127.0.0.1:1\nprefill-rate=120\ndecode-weight=0.2\nmax-inflight=64\ntie-fraction=0.5\nsplit-tpot-target=100ms\n")
	res, err := r.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--prefill-rate", "--decode-weight", "--max-inflight", "--split-tpot-target"}; !slices.Equal(res.Applied, want) || len(res.Refused) != 0 {
		t.Fatalf("applied %v refused %v, want %v and none", res.Applied, res.Refused, want)
	}
	w := router.Weights()
	if w.PrefillTokensPerMs != 120 || w.DecodeMsPerKToken != 0.2 || w.MaxInflight != 64 || w.TieFraction != 0.1 || w.SplitTargets.TPOT != 100*time.Millisecond {
		t.Fatalf("weights in force %+v (tie fraction is on the command line: 0.1)", w)
	}

	write("engine=127.0.0.1:1\nprefill-rate=120\ndecode-weight=-1\n")
	if res, err = r.reload("test"); err != nil || slices.Contains(res.Applied, "--decode-weight") {
		t.Fatalf("a negative decode weight: %+v %v", res, err)
	}
	if got := router.Weights(); got.DecodeMsPerKToken != 0.2 {
		t.Fatalf("refused weights changed the router: %+v", got)
	}
}

func TestChangedFlags(t *testing.T) {
	before := map[string][]string{"a": {"1"}, "b": {"x", "y"}, "c": {"2"}}
	after := map[string][]string{"a": {"1"}, "b": {"x"}, "d": {"3"}}
	if got, want := changedFlags(before, after), []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
	got := commandLineFlags([]string{"--config", "f", "-listen=:1", "--retries=3", "--", "--not-a-flag"})
	if want := map[string]bool{"config": true, "listen": true, "retries": true}; !maps.Equal(got, want) {
		t.Fatalf("command line flags %v, want %v", got, want)
	}
}
