package wire

import (
	"errors"
	"fmt"
)

// Limits bound what a peer may make the receiver hold. A frame or count over a
// limit is refused before anything is allocated for it.
type Limits struct {
	// MaxFrameSize bounds a frame's payload, before and after decompression.
	MaxFrameSize int
	// MaxTokens bounds the prompt token ids of one GENERATE.
	MaxTokens int
	// MaxStopTokens bounds the stop token ids of one GENERATE.
	MaxStopTokens int
	// MaxEvents bounds the events in one KV_EVENTS or SNAPSHOT frame.
	MaxEvents int
	// MaxListItems bounds every other list (models, LoRA adapters, tiers,
	// multimodal items).
	MaxListItems int
}

// Default limit values (PROTOCOL.md, "Limits").
const (
	DefaultMaxFrameSize  = 16 << 20
	DefaultMaxTokens     = 1 << 20
	DefaultMaxStopTokens = 1024
	DefaultMaxEvents     = 1 << 16
	DefaultMaxListItems  = 4096
	// MaxFrameSizeCeiling is the largest MaxFrameSize Validate accepts.
	MaxFrameSizeCeiling = 1 << 30
)

// DefaultLimits returns the limits every implementation must at least accept.
func DefaultLimits() Limits {
	return Limits{
		MaxFrameSize:  DefaultMaxFrameSize,
		MaxTokens:     DefaultMaxTokens,
		MaxStopTokens: DefaultMaxStopTokens,
		MaxEvents:     DefaultMaxEvents,
		MaxListItems:  DefaultMaxListItems,
	}
}

// Validate reports a limit that is zero, negative or above its ceiling.
func (l *Limits) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("wire: limit %s = %d, want %d..%d", name, v, lo, hi))
		}
	}
	check("MaxFrameSize", l.MaxFrameSize, 4096, MaxFrameSizeCeiling)
	check("MaxTokens", l.MaxTokens, 1, MaxFrameSizeCeiling/4)
	check("MaxStopTokens", l.MaxStopTokens, 0, 1<<16)
	check("MaxEvents", l.MaxEvents, 1, MaxFrameSizeCeiling/8)
	check("MaxListItems", l.MaxListItems, 1, 1<<16)
	return errors.Join(errs...)
}

var defaultLimits = DefaultLimits()

// limitsOrDefault lets callers pass nil for the defaults.
func limitsOrDefault(l *Limits) *Limits {
	if l == nil {
		return &defaultLimits
	}
	return l
}
