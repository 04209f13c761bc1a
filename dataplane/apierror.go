package dataplane

import (
	"encoding/json"
	"strconv"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// apiFlavor selects the error body and stream format of an API.
type apiFlavor int

const (
	flavorOpenAI apiFlavor = iota
	flavorAnthropic
)

// apiError is an error to return in the API's own shape.
type apiError struct {
	status     int
	kind       string // OpenAI "type"; mapped for Anthropic
	message    string
	param      string
	retryAfter int // seconds, for 429/503
}

func (e *apiError) Error() string { return e.message }

func badRequest(param, msg string) *apiError {
	return &apiError{status: 400, kind: "invalid_request_error", message: msg, param: param}
}

func notFound(msg string) *apiError {
	return &apiError{status: 404, kind: "not_found_error", message: msg}
}

// body renders the error in the flavor's format.
func (e *apiError) body(f apiFlavor) []byte {
	if f == flavorAnthropic {
		kind := map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
			405: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 502: "api_error",
			503: "overloaded_error", 504: "api_error"}[e.status]
		if kind == "" {
			kind = "api_error"
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": e.message}})
		return b
	}
	kind := e.kind
	if kind == "" || e.status >= 500 {
		kind = map[bool]string{true: "server_error", false: "invalid_request_error"}[e.status >= 500]
	}
	var param any
	if e.param != "" {
		param = e.param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.message, "type": kind, "param": param, "code": nil}})
	return b
}

func writeError(w *httpx.ResponseWriter, f apiFlavor, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body(f))
	_ = w.Finish()
}
