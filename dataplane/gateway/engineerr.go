package gateway

import (
	"errors"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/wire"
)

// retryable reports whether an engine's failure before the first token
// says nothing about the request, so another engine may serve it: the
// engine went away, or was too busy to take it (its queue or its stream
// limit). A request an engine refused for what it holds fails the same
// everywhere, and each retry would cost another engine its work.
func retryable(err error) bool {
	if errors.Is(err, engine.ErrEngineDown) || errors.Is(err, engine.ErrNotReady) {
		return true
	}
	var re *wire.RemoteError
	if !errors.As(err, &re) {
		return false
	}
	switch re.Code {
	case wire.CodeOverloaded, wire.CodeStreamLimit, wire.CodeShutdown:
		return true
	}
	return false
}

// engineError is the client's answer to an engine's refusal, or to the
// engine package's own refusal to send a GENERATE over the wire's limits:
// a request over the limits or otherwise invalid is the client's (400),
// anything else a bad gateway (502).
func engineError(err error) *api.Error {
	if errors.Is(err, wire.ErrLimit) || errors.Is(err, wire.ErrFrameTooLarge) { // refused before sending
		return api.BadRequest("", "the request is over the wire protocol's limits: "+err.Error())
	}
	var re *wire.RemoteError
	if errors.As(err, &re) {
		switch re.Code {
		case wire.CodeBadRequest, wire.CodeLimit, wire.CodeFrameTooLarge:
			return api.BadRequest("", "the engine refused the request: "+re.Message)
		}
	}
	return &api.Error{Status: 502, Message: "engine error: " + err.Error()}
}
