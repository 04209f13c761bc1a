package gguf

import (
	"io"
	"testing"
)

// BenchmarkWrite writes the default model (the tiny shape with -short) to
// io.Discard: what a test pays to get a model.
func BenchmarkWrite(b *testing.B) {
	o := Defaults()
	if testing.Short() {
		o.Shape = tiny()
	}
	if _, err := o.vocab(); err != nil { // the tokenizer is converted once per process
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		info, err := Write(io.Discard, o)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(info.Bytes)
	}
}
