package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxAnswer bounds what the bridge reads of one non-streamed answer
// (/props carries the chat template; /slots one object per slot).
const maxAnswer = 16 << 20

// statusError is a non-200 answer: its status and llama.cpp's message.
type statusError struct {
	path    string
	status  int
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.path, e.status, e.message)
}

// Is makes a 503 (llama.cpp loading its model) ErrUnreachable.
func (e *statusError) Is(target error) bool {
	return target == ErrUnreachable && e.status == http.StatusServiceUnavailable
}

// errorBody is llama.cpp's error answer, {"error": {"code", "message",
// "type"}}, the shape of format_error_response.
type errorBody struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// errorMessage is the message of an error answer: llama.cpp's when the
// body is its error JSON, else the body itself, cut short.
func errorMessage(body []byte) string {
	var e errorBody
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return string(bytes.TrimSpace(body[:min(len(body), 512)]))
}

// call sends one request to the server and returns the body of a 200
// answer. A transport error (ctx's end included) is ErrUnreachable;
// another status a *statusError.
func call(ctx context.Context, c *http.Client, method, url, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil { // refused, reset, or no answer in time: try again (Connect stops when its own context ends)
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrUnreachable, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{path: path, status: resp.StatusCode, message: errorMessage(b)}
	}
	return b, nil
}

// isStatus reports whether err is a *statusError with that status.
func isStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == status
}
