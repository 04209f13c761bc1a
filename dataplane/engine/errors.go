package engine

import "errors"

var (
	// ErrEngineDown is returned to streams whose engine connection failed.
	ErrEngineDown = errors.New("engine: connection lost")
	// ErrNotReady is returned when the engine takes no new requests.
	ErrNotReady = errors.New("engine: not ready")
	// ErrSilent ends a session whose engine sent nothing, not even PONG,
	// for three PING intervals.
	ErrSilent = errors.New("engine: silent for three ping intervals")
)
