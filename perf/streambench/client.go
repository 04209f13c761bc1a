package streambench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// clients stream completions from one kvgate over kept-alive connections.
type clients struct {
	url string
	hc  *http.Client
}

func newClients(base string) *clients {
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true, ForceAttemptHTTP2: false}
	return &clients{url: base + "/v1/completions", hc: &http.Client{Transport: tr}}
}

func (c *clients) close() { c.hc.CloseIdleConnections() }

// counts are what a round's clients read.
type counts struct{ tokens, events int64 }

// round runs n streams of maxTokens tokens each at once and waits for all
// of them; any stream that fails or comes up short fails the round.
func (c *clients) round(ctx context.Context, n, maxTokens int) (counts, error) {
	var tokens, events atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			t, e, err := c.stream(ctx, i, maxTokens)
			tokens.Add(t)
			events.Add(e)
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return counts{}, err // the first is enough to say why
	}
	return counts{tokens: tokens.Load(), events: events.Load()}, nil
}

// stream runs one streamed completion to its end and returns the
// completion tokens its usage chunk reports and the SSE events it read.
func (c *clients) stream(ctx context.Context, i, maxTokens int) (tokens, events int64, err error) {
	body := fmt.Sprintf(`{"model":%q,"prompt":"Stream %d: tell me a long story about routers.","max_tokens":%d,`+
		`"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, Model, i, maxTokens)
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	var last []byte
	events, usage, done, err := readEvents(resp.Body, &last)
	if err != nil {
		return 0, events, err
	}
	if !done {
		return 0, events, fmt.Errorf("stream ended without data: [DONE] after %d events, the last %.300q", events, last)
	}
	if usage != int64(maxTokens) {
		return usage, events, fmt.Errorf("usage says %d completion tokens, want max_tokens %d (the last event %.300q)", usage, maxTokens, last)
	}
	return usage, events, nil
}

var dataPrefix = []byte("data: ")

// readEvents reads an SSE body: the data events, the completion tokens of
// its usage chunk and whether it ended with [DONE]; last keeps the last
// data event before [DONE] (for errors). Lines are read in place
// (bufio.Reader.ReadSlice): the client costs little next to kvgate.
func readEvents(r io.Reader, last *[]byte) (events, usage int64, done bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: only its start matters.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
		}
		if bytes.HasPrefix(line, dataPrefix) {
			data := bytes.TrimSpace(line[len(dataPrefix):])
			switch {
			case string(data) == "[DONE]":
				done = true
			case bytes.Contains(data, []byte(`"usage":{`)):
				var chunk struct {
					Usage struct {
						CompletionTokens int64 `json:"completion_tokens"`
					} `json:"usage"`
				}
				if jerr := json.Unmarshal(data, &chunk); jerr != nil {
					return events, usage, done, fmt.Errorf("usage chunk: %w", jerr)
				}
				usage = chunk.Usage.CompletionTokens
			default:
				events++
			}
			if string(data) != "[DONE]" {
				*last = append((*last)[:0], data...)
			}
		}
		if err == io.EOF {
			return events, usage, done, nil
		}
		if err != nil {
			return events, usage, done, err
		}
	}
}
