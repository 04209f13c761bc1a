package api

import (
	"encoding/json"
	"strconv"
)

// Flavor selects the error body and stream format of an API.
type Flavor uint8

const (
	// OpenAI is the shape of /v1/completions, /v1/chat/completions and the
	// vLLM-style endpoints.
	OpenAI Flavor = iota
	// Anthropic is the shape of /v1/messages.
	Anthropic
)

// String names the flavor.
func (f Flavor) String() string {
	if f == Anthropic {
		return "anthropic"
	}
	return "openai"
}

// Error is an error to return in the API's own shape.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Type is OpenAI's error "type"; Anthropic's is derived from Status.
	Type    string
	Message string
	// Param names the request field at fault, if any.
	Param string
	// RetryAfter, in seconds, becomes a Retry-After header (429, 503).
	RetryAfter int
}

func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 naming the field at fault.
func BadRequest(param, msg string) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Message: msg, Param: param}
}

// NotFound is a 404.
func NotFound(msg string) *Error {
	return &Error{Status: 404, Type: "not_found_error", Message: msg}
}

// anthropicTypes maps statuses onto Anthropic's error types.
var anthropicTypes = map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
	405: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 502: "api_error",
	503: "overloaded_error", 504: "api_error"}

// Body renders the error in the flavor's format.
func (e *Error) Body(f Flavor) []byte {
	if f == Anthropic {
		kind := anthropicTypes[e.Status]
		if kind == "" {
			kind = "api_error"
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": e.Message}})
		return b
	}
	kind := e.Type
	if kind == "" || e.Status >= 500 {
		kind = "invalid_request_error"
		if e.Status >= 500 {
			kind = "server_error"
		}
	}
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.Message, "type": kind, "param": param, "code": nil}})
	return b
}

// RetryAfterHeader is the Retry-After value, "" when there is none.
func (e *Error) RetryAfterHeader() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.Itoa(e.RetryAfter)
}
