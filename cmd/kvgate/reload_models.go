package main

import (
	"errors"
	"runtime/debug"
	"slices"

	"github.com/kvgate/kvgate/dataplane/gateway"
)

// modelSetter is where reloaded --model models go (gateway.Gateway).
type modelSetter interface{ SetModels([]*gateway.Model) }

// errModelsShape: a reload cannot switch between the --tokenizer
// shorthand and --model.
var errModelsShape = errors.New("switching between --tokenizer and --model needs a restart")

// applyModels loads the models of a changed --model list and puts them in
// force (a request keeps the model it resolved before). It reports whether
// they changed; an error (a tokenizer that does not load, a chat template
// that does not render, a switch from or to --tokenizer) keeps the models
// in force.
func (r *reloader) applyModels(next []gateway.ModelSpec) (bool, error) {
	if slices.EqualFunc(next, r.cur.models, specEqual) {
		return false, nil
	}
	set, ok := r.keys.(modelSetter)
	if !ok || len(next) == 0 || len(r.cur.models) == 0 {
		r.log.Warn("reload: --model cannot change here; the models in force stay until a restart", "err", errModelsShape)
		return false, errModelsShape
	}
	models, err := gateway.LoadModels(next)
	if err != nil {
		r.log.Error("reload: --model refused; the models in force stay", "err", err)
		return false, err
	}
	set.SetModels(models)
	debug.FreeOSMemory() // the parse's garbage, as at start
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	r.log.Info("reload: models replaced", "models", names)
	r.cur.models = next
	return true, nil
}

func specEqual(a, b gateway.ModelSpec) bool {
	return a.Name == b.Name && a.Dir == b.Dir && slices.Equal(a.Aliases, b.Aliases) && a.ToolParser == b.ToolParser &&
		a.ReasoningParser == b.ReasoningParser && a.MaxModelLen == b.MaxModelLen
}
