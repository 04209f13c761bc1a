package main

import (
	"io"
	"testing"
	"time"
)

// TestLoRAFlags: the adapter weights' flags reach the router's weights;
// their defaults are route's.
func TestLoRAFlags(t *testing.T) {
	c, err := parseFlags([]string{"--engine", "127.0.0.1:1", "--lora-blind", "--lora-load-ms", "20", "--lora-heat-window", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.lora.weights; !w.Blind || w.LoadMs != 20 || w.HeatWindow != 3*time.Second {
		t.Fatalf("weights %+v", w)
	}
	if c, err = parseFlags([]string{"--engine", "127.0.0.1:1"}, io.Discard); err != nil || c.lora.weights.Blind || c.lora.weights.LoadMs != 50 {
		t.Fatalf("defaults %+v, %v", c.lora.weights, err)
	}
}
