package wire

import (
	"cmp"
	"errors"
	"fmt"
	"math"
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
	// MaxMediaItemBytes bounds one media item's bytes, MaxMediaBytes the
	// sum over one GENERATE's items (media.go); 0: the default.
	MaxMediaItemBytes, MaxMediaBytes int
	// MaxPendingMediaBytes bounds the media sizes one connection's
	// GENERATEs declare while their bytes arrive and are checked (an
	// engine's bound over all its streams; 0: the default).
	MaxPendingMediaBytes int
}

// Default limit values (PROTOCOL.md, "Limits").
const (
	DefaultMaxFrameSize  = 16 << 20
	DefaultMaxTokens     = 1 << 20
	DefaultMaxStopTokens = 1024
	DefaultMaxEvents     = 1 << 16
	DefaultMaxListItems  = 4096
	// DefaultMaxMediaItemBytes is above the 20 MiB a kvgate gateway takes
	// for one image by default; DefaultMaxMediaBytes bounds what one
	// request's images make an engine hold.
	DefaultMaxMediaItemBytes = 32 << 20
	DefaultMaxMediaBytes     = 64 << 20
	// DefaultMaxPendingMediaBytes is four requests at DefaultMaxMediaBytes.
	DefaultMaxPendingMediaBytes = 256 << 20
	// MaxFrameSizeCeiling is the largest MaxFrameSize Validate accepts.
	MaxFrameSizeCeiling = 1 << 30
)

// MaxHandshakeFrame bounds every frame an acceptor reads before the
// handshake completes (PROTOCOL.md, "Limits"): the largest HELLO a dialer
// sends. Dialers are routers and replicas, which serve no model, so their
// HELLO lists no models and no adapters; its largest form is the fixed part,
// the longest id, the two empty list counts and three tiers:
//
//	100 + (2 + 65,535) + 2 + 2 + (1 + 3 x 16) = 65,690 bytes
//
// AUTH (32 bytes) and ERROR (at most 65,539) fit too. An unauthenticated
// peer can therefore make an acceptor hold at most this much (plus the
// header) per pending handshake, instead of a 16 MiB frame.
const MaxHandshakeFrame = 100 + (2 + 0xffff) + 2 + 2 + (1 + NumTiers*16)

// DefaultMaxHandshakes is how many accepted connections a listener holds
// before their handshake completes, unless configured (HandshakeGate).
const DefaultMaxHandshakes = 64

// DefaultLimits returns the limits every implementation must at least accept.
func DefaultLimits() Limits {
	return Limits{
		MaxFrameSize:  DefaultMaxFrameSize,
		MaxTokens:     DefaultMaxTokens,
		MaxStopTokens: DefaultMaxStopTokens,
		MaxEvents:     DefaultMaxEvents,
		MaxListItems:  DefaultMaxListItems,

		MaxMediaItemBytes: DefaultMaxMediaItemBytes,
		MaxMediaBytes:     DefaultMaxMediaBytes,

		MaxPendingMediaBytes: DefaultMaxPendingMediaBytes,
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
	check("MaxMediaItemBytes", l.MaxMediaItemBytes, 0, math.MaxUint32)
	check("MaxMediaBytes", l.MaxMediaBytes, 0, 1<<40)
	check("MaxPendingMediaBytes", l.MaxPendingMediaBytes, 0, 1<<40)
	return errors.Join(errs...)
}

func (l *Limits) mediaItemBytes() int { return cmp.Or(l.MaxMediaItemBytes, DefaultMaxMediaItemBytes) }
func (l *Limits) mediaBytes() int     { return cmp.Or(l.MaxMediaBytes, DefaultMaxMediaBytes) }

var defaultLimits = DefaultLimits()

// limitsOrDefault lets callers pass nil for the defaults.
func limitsOrDefault(l *Limits) *Limits {
	if l == nil {
		return &defaultLimits
	}
	return l
}
