package wire

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every decoding failure wraps exactly one of them, so
// callers branch with errors.Is and never on message text.
var (
	// ErrFrameTooLarge: a frame header declares a payload above Limits.MaxFrameSize,
	// or a decompressed payload would exceed it.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrTruncated: a payload ends before a field it declares.
	ErrTruncated = errors.New("wire: truncated payload")
	// ErrTrailingBytes: a payload carries bytes after its last field.
	ErrTrailingBytes = errors.New("wire: trailing bytes after payload")
	// ErrUnknownType: a frame type this version does not define.
	ErrUnknownType = errors.New("wire: unknown frame type")
	// ErrBadHeader: reserved header bits are set or flags are invalid for the type.
	ErrBadHeader = errors.New("wire: bad frame header")
	// ErrBadValue: a field holds a value outside its documented range.
	ErrBadValue = errors.New("wire: field value out of range")
	// ErrLimit: a count exceeds a configured limit (tokens per GENERATE, events per batch...).
	ErrLimit = errors.New("wire: limit exceeded")
	// ErrDecompress: a compressed payload does not decompress.
	ErrDecompress = errors.New("wire: payload does not decompress")
	// ErrVersion: no protocol version is shared by both sides, or the magic is wrong.
	ErrVersion = errors.New("wire: unsupported protocol version")
	// ErrAuth: the peer failed challenge-response authentication.
	ErrAuth = errors.New("wire: authentication failed")
	// ErrUnexpectedFrame: a frame that is valid but not allowed in the current state
	// (for example GENERATE before the handshake).
	ErrUnexpectedFrame = errors.New("wire: unexpected frame")
	// ErrClosed: the connection was closed locally.
	ErrClosed = errors.New("wire: connection closed")
)

// ErrorCode is the code carried by an ERROR frame (PROTOCOL.md, "Error codes").
type ErrorCode uint16

// Error codes. Codes below 0x100 concern the connection; codes from 0x100 on
// concern one stream and leave the connection usable.
const (
	CodeProtocol      ErrorCode = 0x01 // malformed or unexpected frame
	CodeVersion       ErrorCode = 0x02 // no common protocol version
	CodeAuth          ErrorCode = 0x03 // authentication failed
	CodeFrameTooLarge ErrorCode = 0x04 // frame over the receiver's limit
	CodeLimit         ErrorCode = 0x05 // a count over the receiver's limit
	CodeDecompress    ErrorCode = 0x06 // compressed payload did not decompress
	CodeHashScheme    ErrorCode = 0x07 // block size or hash scheme not acceptable
	CodeShutdown      ErrorCode = 0x08 // the sender is going away now
	CodeInternal      ErrorCode = 0x09 // the sender failed internally

	CodeBadRequest   ErrorCode = 0x100 // GENERATE fields invalid
	CodeUnknownModel ErrorCode = 0x101 // model not served
	CodeUnknownLoRA  ErrorCode = 0x102 // LoRA adapter not loaded
	CodeOverloaded   ErrorCode = 0x103 // queue full: retry elsewhere
	CodeCancelled    ErrorCode = 0x104 // stream cancelled
	CodeStreamLimit  ErrorCode = 0x105 // too many open streams
	CodeStreamFailed ErrorCode = 0x106 // generation failed mid-stream
	CodeDuplicate    ErrorCode = 0x107 // stream id already open
	CodeRequestLimit ErrorCode = 0x108 // GENERATE count over the receiver's limit
)

var codeNames = map[ErrorCode]string{
	CodeProtocol: "protocol", CodeVersion: "version", CodeAuth: "auth",
	CodeFrameTooLarge: "frame_too_large", CodeLimit: "limit", CodeDecompress: "decompress",
	CodeHashScheme: "hash_scheme", CodeShutdown: "shutdown", CodeInternal: "internal",
	CodeBadRequest: "bad_request", CodeUnknownModel: "unknown_model", CodeUnknownLoRA: "unknown_lora",
	CodeOverloaded: "overloaded", CodeCancelled: "cancelled", CodeStreamLimit: "stream_limit",
	CodeStreamFailed: "stream_failed", CodeDuplicate: "duplicate_stream", CodeRequestLimit: "request_limit",
}

// String returns the code's name as used in logs and metrics.
func (c ErrorCode) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code_%#x", uint16(c))
}

// ConnectionLevel reports whether the code ends the whole connection.
func (c ErrorCode) ConnectionLevel() bool { return c < 0x100 }

// CodeOf maps a local decoding error to the code to send to the peer.
func CodeOf(err error) ErrorCode {
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return CodeFrameTooLarge
	case errors.Is(err, ErrLimit):
		return CodeLimit
	case errors.Is(err, ErrDecompress):
		return CodeDecompress
	case errors.Is(err, ErrVersion):
		return CodeVersion
	case errors.Is(err, ErrAuth):
		return CodeAuth
	default:
		return CodeProtocol
	}
}

// RequestCode reports whether an error decoding a GENERATE concerns only
// that request, and the stream code to refuse it with: a count over a
// limit (stop_token_ids, prompt, mm_items) is REQUEST_LIMIT, a field out of
// range BAD_REQUEST. The frame itself was well formed, so the connection
// stays in step and only the request fails (PROTOCOL.md section 8).
// Anything else (truncated, trailing bytes) is a broken encoder: ok is
// false and the connection ends.
func RequestCode(err error) (code ErrorCode, ok bool) {
	switch {
	case errors.Is(err, ErrLimit):
		return CodeRequestLimit, true
	case errors.Is(err, ErrBadValue):
		return CodeBadRequest, true
	}
	return 0, false
}

// RemoteError is an ERROR frame received from the peer, returned as a Go error.
// It matches ErrAuth and ErrVersion for the corresponding codes.
type RemoteError struct {
	Code    ErrorCode
	Stream  uint32
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("wire: peer error %s on stream %d: %s", e.Code, e.Stream, e.Message)
}

// Is lets errors.Is(err, ErrAuth) and errors.Is(err, ErrVersion) see remote refusals.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrAuth:
		return e.Code == CodeAuth
	case ErrVersion:
		return e.Code == CodeVersion
	}
	return false
}
