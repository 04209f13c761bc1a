package wire

import (
	"encoding/binary"
	"fmt"
)

// HeaderSize is the size of every frame header in bytes.
//
//	0      1      2             4                        8                       12
//	+------+------+-------------+------------------------+------------------------+
//	| type | flags| reserved=0  |  length (u32 LE)       |  stream id (u32 LE)    |
//	+------+------+-------------+------------------------+------------------------+
//	| payload (length bytes) ...
const HeaderSize = 12

// Type identifies a frame's message.
type Type uint8

// Frame types of protocol version 1.
const (
	TypeHello           Type = 0x01
	TypeWelcome         Type = 0x02
	TypeAuth            Type = 0x03
	TypePing            Type = 0x04
	TypePong            Type = 0x05
	TypeGoaway          Type = 0x06
	TypeError           Type = 0x07
	TypeGenerate        Type = 0x10
	TypeTokens          Type = 0x11
	TypeCancel          Type = 0x12
	TypeKVEvents        Type = 0x20
	TypeLoad            Type = 0x21
	TypeLoadRequest     Type = 0x22
	TypeSnapshotRequest Type = 0x23
	TypeSnapshot        Type = 0x24
	TypeRing            Type = 0x30
)

// typeNames is indexed by type ("": not a type of version 1): ParseHeader
// checks every frame's type against it.
var typeNames = [256]string{
	TypeHello: "HELLO", TypeWelcome: "WELCOME", TypeAuth: "AUTH", TypePing: "PING",
	TypePong: "PONG", TypeGoaway: "GOAWAY", TypeError: "ERROR", TypeGenerate: "GENERATE",
	TypeTokens: "TOKENS", TypeCancel: "CANCEL", TypeKVEvents: "KV_EVENTS", TypeLoad: "LOAD",
	TypeLoadRequest: "LOAD_REQUEST", TypeSnapshotRequest: "SNAPSHOT_REQUEST", TypeSnapshot: "SNAPSHOT", TypeRing: "RING",
	TypeAdapters: "ADAPTERS", TypeMedia: "MEDIA",
}

// String returns the type's name as written in PROTOCOL.md.
func (t Type) String() string {
	if s := typeNames[t]; s != "" {
		return s
	}
	return fmt.Sprintf("TYPE_%#02x", uint8(t))
}

// Known reports whether t is defined by protocol version 1.
func (t Type) Known() bool { return typeNames[t] != "" }

// Compressible reports whether frames of type t may carry a compressed payload.
func (t Type) Compressible() bool {
	return t == TypeKVEvents || t == TypeSnapshot || t == TypeRing
}

// Frame header flags.
const (
	// FlagCodecMask selects the payload codec (CodecNone, CodecS2, CodecZstd).
	FlagCodecMask uint8 = 0x03
	flagsDefined        = FlagCodecMask
)

// Codec is a payload compression codec, carried in the low two flag bits.
type Codec uint8

// Payload codecs.
const (
	CodecNone Codec = 0
	CodecS2   Codec = 1
	CodecZstd Codec = 2
)

var codecNames = [...]string{"none", "s2", "zstd"}

// String returns the codec's name.
func (c Codec) String() string {
	if int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec_%d", uint8(c))
}

// Header is a decoded frame header.
type Header struct {
	Type   Type
	Flags  uint8
	Length uint32
	Stream uint32
}

// Codec returns the payload codec named by the header flags.
func (h Header) Codec() Codec { return Codec(h.Flags & FlagCodecMask) }

// Frame is one decoded frame. Payload is a view into the reader's buffer
// (already decompressed) and is valid until the next read.
type Frame struct {
	Header
	Payload []byte
}

// AppendHeader appends the 12-byte header for a payload of length n.
func AppendHeader(dst []byte, t Type, flags uint8, stream uint32, n int) []byte {
	dst = append(dst, byte(t), flags, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	return binary.LittleEndian.AppendUint32(dst, stream)
}

// ParseHeader decodes and validates a header against the limits. It checks
// everything that can be checked without the payload: known type, reserved
// bits, codec allowed for the type, and length within MaxFrameSize.
func ParseHeader(b []byte, lim *Limits) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrTruncated
	}
	lim = limitsOrDefault(lim)
	h := Header{
		Type:   Type(b[0]),
		Flags:  b[1],
		Length: binary.LittleEndian.Uint32(b[4:]),
		Stream: binary.LittleEndian.Uint32(b[8:]),
	}
	if !h.Type.Known() {
		return h, fmt.Errorf("parsing header: type %#02x: %w", b[0], ErrUnknownType)
	}
	if b[2] != 0 || b[3] != 0 || h.Flags&^flagsDefined != 0 {
		return h, fmt.Errorf("parsing header: reserved bits set: %w", ErrBadHeader)
	}
	if c := h.Codec(); c != CodecNone && (!h.Type.Compressible() || c > CodecZstd) {
		return h, fmt.Errorf("parsing header: codec %d on %s: %w", c, h.Type, ErrBadHeader)
	}
	if uint64(h.Length) > uint64(lim.MaxFrameSize) {
		return h, fmt.Errorf("parsing header: %s of %d bytes over %d: %w",
			h.Type, h.Length, lim.MaxFrameSize, ErrFrameTooLarge)
	}
	return h, nil
}

// SplitFrame finds the first whole frame in b. It returns the header, the raw
// (possibly compressed) payload and the number of bytes the frame occupies. If b
// holds no whole frame yet, n is 0 and err is nil: the caller reads more.
// It never allocates.
func SplitFrame(b []byte, lim *Limits) (h Header, payload []byte, n int, err error) {
	if len(b) < HeaderSize {
		return Header{}, nil, 0, nil
	}
	h, err = ParseHeader(b, lim)
	if err != nil {
		return h, nil, 0, err
	}
	end := HeaderSize + int(h.Length)
	if len(b) < end {
		return h, nil, 0, nil
	}
	return h, b[HeaderSize:end], end, nil
}
