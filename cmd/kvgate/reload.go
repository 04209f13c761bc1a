package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kvgate/kvgate/dataplane/admin"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
)

// liveFlags are the flags a reload applies while serving: API keys, the
// log level, the engine list, the routing weights (the split targets
// among them) and the --model models. A change the config
// file makes to any other flag is refused: logged with the flag's name,
// the value in force kept until a restart.
var liveFlags = map[string]bool{"api-key": true, "api-key-file": true, "log-level": true, "engine": true,
	"prefill-rate": true, "cpu-block-cost": true, "decode-weight": true, "tie-fraction": true,
	"report-delay": true, "max-inflight": true, "split-ttft-target": true, "split-tpot-target": true, "model": true}

// weightFlags are the routing weights among liveFlags, in the order a
// reload reports them.
var weightFlags = []string{"prefill-rate", "cpu-block-cost", "decode-weight", "tie-fraction", "report-delay", "max-inflight",
	"split-ttft-target", "split-tpot-target"}

// keySetter is where reloaded API keys go (gateway.Gateway).
type keySetter interface{ SetAPIKeys(map[string]bool) }

// weightSetter is where reloaded routing weights go (route.Router).
type weightSetter interface{ SetWeights(route.Weights) error }

// reloader applies a re-read configuration (SIGHUP, POST /admin/reload):
// the command line parsed again, and with it the --config file and the
// --api-key-file as they are now.
type reloader struct {
	mu   sync.Mutex // one reload at a time; guards cur and file
	cur  *config    // the configuration in force
	file map[string][]string
	keys keySetter
	wts  weightSetter // nil: weights are not reloaded
	pool *engine.Pool
	log  *slog.Logger
}

// newReloader starts from the configuration c the daemon runs with.
func newReloader(c *config, keys keySetter, wts weightSetter, pool *engine.Pool, log *slog.Logger) *reloader {
	file, _ := fileValues(c.configFile) // parseFlags read it a moment ago
	return &reloader{cur: c, file: file, keys: keys, wts: wts, pool: pool, log: log}
}

// watch reloads on every SIGHUP until ctx ends. SIGHUP is caught from
// its return (before kvgate announces its address: a SIGHUP then must not
// end the process, as it does by default).
func (r *reloader) watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_, _ = r.reload("SIGHUP")
			}
		}
	}()
}

// reload reads the configuration again and applies what can change live.
// An invalid configuration changes nothing.
func (r *reloader) reload(why string) (*admin.ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := parseFlags(r.cur.args, io.Discard)
	if err == nil && next.checkOnly {
		err = errors.New("--check-config in the configuration")
	}
	var file map[string][]string
	if err == nil {
		file, err = fileValues(next.configFile)
	}
	if err != nil {
		r.log.Error("reload refused: the configuration is invalid, nothing changed", "trigger", why, "err", err)
		return nil, fmt.Errorf("reload: %w", err)
	}
	res := &admin.ReloadResult{Applied: []string{}, Refused: []string{}}
	onCommandLine := commandLineFlags(r.cur.args)
	changed := changedFlags(r.file, file)
	for _, name := range changed {
		if liveFlags[name] {
			continue // applied below, by comparing what is in force
		}
		if onCommandLine[name] {
			r.log.Info("reload: the command line sets this flag, the file's change has no effect", "flag", "--"+name)
			file[name] = r.file[name]
			continue
		}
		r.log.Warn("reload: this flag cannot change while kvgate runs; the value in force stays until a restart", "flag", "--"+name)
		res.Refused = append(res.Refused, "--"+name)
		if old, ok := r.file[name]; ok {
			file[name] = old // refused again at the next reload, until a restart
		} else {
			delete(file, name)
		}
	}
	r.file = file
	if !maps.Equal(next.apiKeys, r.cur.apiKeys) {
		r.keys.SetAPIKeys(next.apiKeys)
		if len(next.apiKeys) == 0 {
			r.log.Warn("reload: no API key configured any more: requests need none")
		}
		r.cur.apiKeys = next.apiKeys
		if slices.Contains(changed, "api-key") {
			res.Applied = append(res.Applied, "--api-key")
		}
		if slices.Contains(changed, "api-key-file") || !slices.Contains(changed, "api-key") {
			res.Applied = append(res.Applied, "--api-key-file") // its path, or the keys the file holds
		}
		r.log.Info("reload: API keys replaced", "keys", len(next.apiKeys))
	}
	if lv := next.logLevel.Level(); lv != r.cur.logLevel.Level() {
		r.log.Info("reload: log level", "from", r.cur.logLevel.Level().String(), "to", lv.String())
		r.cur.logLevel.Set(lv) // the handler's own LevelVar
		res.Applied = append(res.Applied, "--log-level")
	}
	if r.applyEngines(next.engines) {
		res.Applied = append(res.Applied, "--engine")
	}
	res.Applied = append(res.Applied, r.applyWeights(next.weights, changed, onCommandLine)...)
	if changed, err := r.applyModels(next.models); err != nil {
		res.Refused = append(res.Refused, "--model")
	} else if changed {
		res.Applied = append(res.Applied, "--model")
	}
	r.log.Info("config reloaded", "trigger", why, "applied", res.Applied, "refused", res.Refused)
	return res, nil
}

// applyWeights puts new routing weights in force, if they differ from
// those in force, and returns the weight flags the file changed (not
// those the command line sets: its value stands).
func (r *reloader) applyWeights(next route.Weights, changed []string, onCommandLine map[string]bool) []string {
	if r.wts == nil || next == r.cur.weights {
		return nil
	}
	if err := r.wts.SetWeights(next); err != nil {
		r.log.Error("reload: routing weights refused; those in force stay", "err", err)
		return nil
	}
	r.log.Info("reload: routing weights replaced", "prefill_rate", next.PrefillTokensPerMs,
		"decode_weight", next.DecodeMsPerKToken, "tie_fraction", next.TieFraction, "max_inflight", next.MaxInflight)
	r.cur.weights = next
	var applied []string
	for _, name := range weightFlags {
		if slices.Contains(changed, name) && !onCommandLine[name] {
			applied = append(applied, "--"+name)
		}
	}
	return applied
}

// applyEngines adds the --engine addresses new in want and removes those
// gone from it (they finish their streams first); it reports a change.
func (r *reloader) applyEngines(want []string) bool {
	have := r.cur.engines
	changed := false
	for _, a := range want {
		if slices.Contains(have, a) {
			continue
		}
		changed = true
		if _, err := r.pool.Add(a); err != nil && !errors.Is(err, engine.ErrEngineExists) {
			r.log.Warn("reload: adding an engine", "engine", a, "err", err)
			continue
		}
		r.log.Info("reload: engine added", "engine", a)
	}
	for _, a := range have {
		if slices.Contains(want, a) {
			continue
		}
		changed = true
		if _, err := r.pool.Remove(a); err != nil && !errors.Is(err, engine.ErrUnknownEngine) {
			r.log.Warn("reload: removing an engine", "engine", a, "err", err)
			continue
		}
		r.log.Info("reload: engine removed", "engine", a)
	}
	r.cur.engines = slices.Clone(want)
	return changed
}

// fileValues reads a --config file into its values by flag name (a flag
// may be given more than once); no file, no values.
func fileValues(path string) (map[string][]string, error) {
	out := map[string][]string{}
	if path == "" {
		return out, nil
	}
	args, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out[name] = append(out[name], value)
	}
	return out, nil
}

// changedFlags names, sorted, the flags whose values differ between two
// readings of the config file, lines added or removed included.
func changedFlags(before, after map[string][]string) []string {
	var out []string
	for name, v := range after {
		if !slices.Equal(before[name], v) {
			out = append(out, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// commandLineFlags names the flags the command line sets (-name, --name,
// with =value or not): they win over the file.
func commandLineFlags(args []string) map[string]bool {
	out := map[string]bool{}
	for _, a := range args {
		if a == "--" {
			break
		}
		if name, ok := strings.CutPrefix(a, "-"); ok && name != "" {
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			out[name] = true
		}
	}
	return out
}
