package main

import (
	"flag"

	"github.com/kvgate/kvgate/dataplane/route"
)

// loraFlags weigh LoRA adapter loads in kv's estimate (route.AdapterWeights).
// Which adapters kvgate may ask for comes from the engines' handshakes: an
// engine lists every adapter it can load, resident or not (kvgate-bridge
// --lora-adapter NAME=SOURCE), and keeps the source to itself
// (wire/PROTOCOL.md 6.9).
type loraFlags struct{ weights route.AdapterWeights }

func (l *loraFlags) register(fs *flag.FlagSet) {
	l.weights = route.DefaultAdapterWeights()
	fs.Float64Var(&l.weights.LoadMs, "lora-load-ms", l.weights.LoadMs, "kv: an adapter load's time in ms until an engine has reported its own (ADAPTERS load_ns)")
	fs.DurationVar(&l.weights.HeatWindow, "lora-heat-window", l.weights.HeatWindow, "kv: the adapter a load would evict costs one more load times exp(-idle/window)")
	fs.BoolVar(&l.weights.Blind, "lora-blind", false, "kv: ignore adapter residency (every adapter costs nothing to load anywhere): a baseline for measurements")
}
