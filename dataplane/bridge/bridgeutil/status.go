package bridgeutil

import (
	"net/http"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// CodeOfStatus maps an engine's HTTP error status onto the stream ERROR
// code a router acts on: 404 an unknown model, 429 and 503 an overloaded
// (or still loading) engine the router may retry elsewhere, other 4xx a
// bad request, the rest a failed stream.
func CodeOfStatus(status int) wire.ErrorCode {
	switch {
	case status == http.StatusNotFound:
		return wire.CodeUnknownModel
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return wire.CodeOverloaded
	case status >= 400 && status < 500:
		return wire.CodeBadRequest
	}
	return wire.CodeStreamFailed
}

// NewHTTPClient is a client for one engine: many concurrent streams.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}}
}
