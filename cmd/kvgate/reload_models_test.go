package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/gateway"
	"github.com/kvgate/kvgate/kvstore"
)

// gatewayRecorder is a keySetter and a modelSetter that keeps the models
// it was given.
type gatewayRecorder struct {
	keyRecorder
	models [][]*gateway.Model
}

func (g *gatewayRecorder) SetModels(m []*gateway.Model) { g.models = append(g.models, m) }

// TestReloadModels: a changed --model list in the config file is loaded
// and put in force; one whose tokenizer does not load is refused and the
// models in force stay; without a modelSetter nothing is applied.
func TestReloadModels(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "kvgate.conf")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("engine=127.0.0.1:1\nmodel=Qwen/Qwen3-8B=builtin\n")
	c, err := parseFlags([]string{"--config", conf}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), c.engines)
	t.Cleanup(pool.Close)
	rec := &gatewayRecorder{}
	r := newReloader(c, rec, nil, pool, slog.New(slog.DiscardHandler))

	write("engine=127.0.0.1:1\nmodel=Qwen/Qwen3-8B=builtin,alias=qwen\nmodel=other=builtin\n")
	res, err := r.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Applied, []string{"--model"}) || len(rec.models) != 1 {
		t.Fatalf("applied %v refused %v, models set %d times", res.Applied, res.Refused, len(rec.models))
	}
	if got := rec.models[0]; len(got) != 2 || got[0].Name != "Qwen/Qwen3-8B" || !slices.Equal(got[0].Aliases, []string{"qwen"}) || got[1].Name != "other" {
		t.Fatalf("models put in force: %+v", got)
	}

	write("engine=127.0.0.1:1\nmodel=Qwen/Qwen3-8B=" + filepath.Join(dir, "missing") + "\n")
	if res, err = r.reload("test"); err != nil || !slices.Equal(res.Refused, []string{"--model"}) || len(rec.models) != 1 {
		t.Fatalf("a model that does not load: %+v %v, models set %d times", res, err, len(rec.models))
	}
	if len(c.models) != 2 {
		t.Fatalf("the refused list replaced the models in force: %+v", c.models)
	}

	// A reloader whose gateway cannot take models refuses the change.
	r2 := newReloader(c, &keyRecorder{}, nil, pool, slog.New(slog.DiscardHandler))
	write("engine=127.0.0.1:1\nmodel=third=builtin\n")
	if res, err = r2.reload("test"); err != nil || !slices.Equal(res.Refused, []string{"--model"}) {
		t.Fatalf("no modelSetter: %+v %v", res, err)
	}
}
