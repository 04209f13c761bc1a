package main

import (
	"io"
	"testing"
)

// TestParseMultimodal: images are on by default and --multimodal=false
// turns the feature off.
func TestParseMultimodal(t *testing.T) {
	for _, c := range []struct {
		args []string
		off  bool
	}{{nil, false}, {[]string{"--multimodal=false"}, true}, {[]string{"--multimodal"}, false}} {
		cfg, _, _, err := parseFlags(c.args, io.Discard)
		if err != nil || cfg.NoMultimodal != c.off {
			t.Fatalf("%v: NoMultimodal %v, %v; want %v", c.args, cfg.NoMultimodal, err, c.off)
		}
	}
}
