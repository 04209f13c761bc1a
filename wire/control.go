package wire

import "fmt"

// Auth carries the dialer's proof that it knows the shared secret.
//
//	| proof [32] |
type Auth struct{ Proof [32]byte }

// Type implements Message.
func (*Auth) Type() Type { return TypeAuth }

// AppendPayload implements Message.
func (m *Auth) AppendPayload(dst []byte) ([]byte, error) { return append(dst, m.Proof[:]...), nil }

// Decode implements Message.
func (m *Auth) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	copy(m.Proof[:], c.take(32, "proof"))
	return c.done("AUTH")
}

// Ping asks the peer to answer PONG with the same data (liveness and RTT).
//
//	| data u64 |
type Ping struct{ Data uint64 }

// Pong answers PING with its data.
//
//	| data u64 |
type Pong struct{ Data uint64 }

// Type implements Message.
func (*Ping) Type() Type { return TypePing }

// Type implements Message.
func (*Pong) Type() Type { return TypePong }

// AppendPayload implements Message.
func (m *Ping) AppendPayload(dst []byte) ([]byte, error) { return appendU64Payload(dst, m.Data) }

// AppendPayload implements Message.
func (m *Pong) AppendPayload(dst []byte) ([]byte, error) { return appendU64Payload(dst, m.Data) }

// Decode implements Message.
func (m *Ping) Decode(p []byte, _ *Limits) error { return decodeU64Payload(p, &m.Data, "PING") }

// Decode implements Message.
func (m *Pong) Decode(p []byte, _ *Limits) error { return decodeU64Payload(p, &m.Data, "PONG") }

func appendU64Payload(dst []byte, v uint64) ([]byte, error) {
	e := encoder{b: dst}
	e.u64(v)
	return e.b, nil
}

func decodeU64Payload(p []byte, v *uint64, what string) error {
	c := cursor{b: p}
	*v = c.u64("data")
	return c.done(what)
}

// Goaway tells the peer that the sender is draining: no new streams will be
// accepted; open streams finish within DrainMillis.
//
//	| code u16 | reserved u16 | drain_ms u32 | message str16 |
type Goaway struct {
	Code        ErrorCode
	DrainMillis uint32
	Message     string
}

// Type implements Message.
func (*Goaway) Type() Type { return TypeGoaway }

// AppendPayload implements Message.
func (m *Goaway) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u16(uint16(m.Code))
	e.zero(2)
	e.u32(m.DrainMillis)
	e.str16([]byte(m.Message), "message")
	return e.b, e.err
}

// Decode implements Message.
func (m *Goaway) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.Code = ErrorCode(c.u16("code"))
	c.zero(2, "reserved")
	m.DrainMillis = c.u32("drain_ms")
	m.Message = string(c.str16("message"))
	return c.done("GOAWAY")
}

// Error reports a failure. On stream 0 it concerns the connection, which the
// sender closes after it; on a stream it ends that stream only.
//
//	| code u16 | message str16 |
type Error struct {
	Code    ErrorCode
	Message string
}

// Type implements Message.
func (*Error) Type() Type { return TypeError }

// AppendPayload implements Message.
func (m *Error) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u16(uint16(m.Code))
	e.str16([]byte(m.Message), "message")
	return e.b, e.err
}

// Decode implements Message.
func (m *Error) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.Code = ErrorCode(c.u16("code"))
	m.Message = string(c.str16("message"))
	return c.done("ERROR")
}

// AsError returns the frame as a *RemoteError for the given stream.
func (m *Error) AsError(stream uint32) error {
	return &RemoteError{Code: m.Code, Stream: stream, Message: m.Message}
}

// CancelReason says why a stream was cancelled.
type CancelReason uint8

// Cancel reasons.
const (
	CancelClientGone CancelReason = 0 // the HTTP client disconnected
	CancelTimeout    CancelReason = 1 // the router's deadline passed
	CancelShutdown   CancelReason = 2 // the router is shutting down
	CancelRerouted   CancelReason = 3 // the router moved the request elsewhere
)

var cancelNames = [...]string{"client_gone", "timeout", "shutdown", "rerouted"}

// String returns the reason's name.
func (r CancelReason) String() string {
	if int(r) < len(cancelNames) {
		return cancelNames[r]
	}
	return fmt.Sprintf("cancel_%d", uint8(r))
}

// Cancel stops a stream. The engine frees the request's blocks and ends the
// stream with a last TOKENS frame (finish reason cancelled) or an ERROR.
//
//	| reason u8 |
type Cancel struct{ Reason CancelReason }

// Type implements Message.
func (*Cancel) Type() Type { return TypeCancel }

// AppendPayload implements Message.
func (m *Cancel) AppendPayload(dst []byte) ([]byte, error) { return append(dst, byte(m.Reason)), nil }

// Decode implements Message.
func (m *Cancel) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.Reason = CancelReason(c.u8("reason"))
	if c.err == nil && m.Reason > CancelRerouted {
		return fmt.Errorf("decoding CANCEL: reason %d: %w", m.Reason, ErrBadValue)
	}
	return c.done("CANCEL")
}

// LoadRequest asks an engine for a LOAD report now. Empty payload.
type LoadRequest struct{}

// Type implements Message.
func (*LoadRequest) Type() Type { return TypeLoadRequest }

// AppendPayload implements Message.
func (*LoadRequest) AppendPayload(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*LoadRequest) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	return c.done("LOAD_REQUEST")
}

// SnapshotRequest asks an engine for its whole cached block set.
//
//	| snapshot_id u32 |
type SnapshotRequest struct{ SnapshotID uint32 }

// Type implements Message.
func (*SnapshotRequest) Type() Type { return TypeSnapshotRequest }

// AppendPayload implements Message.
func (m *SnapshotRequest) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u32(m.SnapshotID)
	return e.b, nil
}

// Decode implements Message.
func (m *SnapshotRequest) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.SnapshotID = c.u32("snapshot_id")
	return c.done("SNAPSHOT_REQUEST")
}
