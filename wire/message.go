package wire

import (
	"encoding/binary"
	"fmt"
)

// Message is a wire message that can be encoded into a frame payload and
// decoded back. Decode keeps views into the payload; it never copies token ids,
// hashes or strings.
type Message interface {
	// Type is the frame type that carries the message.
	Type() Type
	// AppendPayload appends the encoded payload to dst.
	AppendPayload(dst []byte) ([]byte, error)
	// Decode parses payload into the message, checking it against lim.
	Decode(payload []byte, lim *Limits) error
}

// AppendFrame appends m as one uncompressed frame on stream.
func AppendFrame(dst []byte, stream uint32, m Message) ([]byte, error) {
	start := len(dst)
	dst = AppendHeader(dst, m.Type(), 0, stream, 0)
	dst, err := m.AppendPayload(dst)
	if err != nil {
		return dst[:start], fmt.Errorf("encoding %s: %w", m.Type(), err)
	}
	n := len(dst) - start - HeaderSize
	if n > MaxFrameSizeCeiling {
		return dst[:start], fmt.Errorf("encoding %s: %d bytes: %w", m.Type(), n, ErrFrameTooLarge)
	}
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(n))
	return dst, nil
}

// DecodeFrame decodes an uncompressed frame's payload into m, checking that the
// frame carries m's type.
func DecodeFrame(f Frame, m Message, lim *Limits) error {
	if f.Type != m.Type() {
		return fmt.Errorf("decoding %s as %s: %w", f.Type, m.Type(), ErrUnexpectedFrame)
	}
	return m.Decode(f.Payload, limitsOrDefault(lim))
}

// NewMessage returns an empty message for a frame type, or nil for an unknown type.
func NewMessage(t Type) Message {
	switch t {
	case TypeHello:
		return &Hello{}
	case TypeWelcome:
		return &Welcome{}
	case TypeAuth:
		return &Auth{}
	case TypePing:
		return &Ping{}
	case TypePong:
		return &Pong{}
	case TypeGoaway:
		return &Goaway{}
	case TypeError:
		return &Error{}
	case TypeGenerate:
		return &Generate{}
	case TypeTokens:
		return &TokensMsg{}
	case TypeCancel:
		return &Cancel{}
	case TypeKVEvents:
		return &KVEvents{}
	case TypeLoad:
		return &Load{}
	case TypeLoadRequest:
		return &LoadRequest{}
	case TypeSnapshotRequest:
		return &SnapshotRequest{}
	case TypeSnapshot:
		return &Snapshot{}
	case TypeRing:
		return &Ring{}
	case TypeAdapters:
		return &Adapters{}
	case TypeMedia:
		return &MediaChunk{}
	}
	return nil
}
