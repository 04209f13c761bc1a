package engine

import "errors"

var (
	// ErrEngineDown is returned to streams whose engine connection failed,
	// or whose engine stopped answering (ErrUnresponsive wraps it): a
	// request that has had no token yet may be re-routed.
	ErrEngineDown = errors.New("engine: connection lost")
	// ErrNotReady is returned when the engine takes no new requests.
	ErrNotReady = errors.New("engine: not ready")
	// ErrSilent ends a session whose engine sent nothing, not even PONG,
	// for Config.DropAfter after a PING.
	ErrSilent = errors.New("engine: silent past the drop-after time")
	// ErrUnresponsive ends the open streams of an engine that answered no
	// PING for Config.PingTimeout. Errors that carry it also match
	// ErrEngineDown.
	ErrUnresponsive = errors.New("engine: unresponsive")
	// ErrTokenTimeout ends a started stream that had no frame for
	// Config.TokenTimeout.
	ErrTokenTimeout = errors.New("engine: no token within the token timeout")
	// ErrBadAddress refuses an engine address that is not HOST:PORT.
	ErrBadAddress = errors.New("engine: bad address")
	// ErrEngineExists refuses adding an address the pool already has.
	ErrEngineExists = errors.New("engine: already in the pool")
	// ErrUnknownEngine: no engine of the pool has that address or id.
	ErrUnknownEngine = errors.New("engine: no such engine")
	// ErrPoolClosed refuses changes to a closed pool.
	ErrPoolClosed = errors.New("engine: pool closed")
)
