package bridgeutil

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// GenerationPost is the POST of a generation request's JSON body to url.
// It carries an Idempotency-Key, so that net/http sends it again on a
// fresh connection when the engine closed the reused one before it
// answered: an idle keep-alive close racing the reuse (uvicorn's default
// closes after 5 s idle, this client keeps connections for 90). net/http
// does so only for requests it may take as idempotent, and asking an
// engine again is safe: a generation changes nothing on it but its cache.
func GenerationPost(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", postPrefix+strconv.FormatUint(postSeq.Add(1), 10))
	return req, nil
}

var (
	postSeq    atomic.Uint64
	postPrefix = "kvgate-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
)
