package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kvgate/kvgate/perf/workload"
)

// sendOne sends one streamed request and records what it saw; latencies
// count from due, the time it was scheduled.
func sendOne(ctx context.Context, c *http.Client, o Options, target string, r workload.Request, start, due time.Time, rec *Recorder) {
	body, path := requestBody(o, r)
	req, err := http.NewRequestWithContext(ctx, "POST", target+path, bytes.NewReader(body))
	if err != nil {
		rec.Fail(err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
		req.Header.Set("x-api-key", o.APIKey)
	}
	if r.Session != "" {
		req.Header.Set("X-Session-Id", r.Session)
	}
	resp, err := c.Do(req)
	if err != nil {
		rec.Fail(err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		rec.Fail(fmt.Sprintf("status %d: %s", resp.StatusCode, b))
		return
	}
	engine := resp.Header.Get("x-kvgate-engine")
	var first, last time.Time
	var gaps []time.Duration
	var prompt, cached, output int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		var ev streamEvent
		if json.Unmarshal([]byte(line[6:]), &ev) != nil {
			continue
		}
		if ev.Error != nil {
			rec.Fail("in-stream error: " + string(*ev.Error))
			return
		}
		if ev.hasText() {
			now := time.Now()
			if first.IsZero() {
				first = now
			} else {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
		}
		if u := ev.usage(); u != nil {
			prompt, cached, output = max(prompt, u.prompt), max(cached, u.cached), max(output, u.output)
		}
	}
	if err := sc.Err(); err != nil || first.IsZero() {
		rec.Fail(fmt.Sprintf("stream ended without tokens: %v", err))
		return
	}
	if prompt == 0 {
		prompt = len(r.Prompt)
	}
	rec.OK(engine, due.Sub(start), first.Sub(due), last.Sub(due), gaps, prompt, cached, output)
}

// AdapterModel is the model a request for LoRA adapter id names: the
// adapter's name, MODEL-loraID (start the engines with those adapters,
// kvgate-sim --lora 1=MODEL-lora1,...).
func AdapterModel(model string, id uint32) string { return fmt.Sprintf("%s-lora%d", model, id) }

func requestBody(o Options, r workload.Request) ([]byte, string) {
	if r.LoRA != 0 {
		o.Model = AdapterModel(o.Model, r.LoRA)
	}
	switch o.API {
	case "openai-chat":
		b, _ := json.Marshal(map[string]any{"model": o.Model, "max_tokens": r.Output, "ignore_eos": true, "stream": true,
			"stream_options": map[string]any{"include_usage": true}, "user": r.Session,
			"messages": []any{map[string]any{"role": "user", "content": o.Detokenize(r.Prompt)}}})
		return b, "/v1/chat/completions"
	case "anthropic":
		b, _ := json.Marshal(map[string]any{"model": o.Model, "max_tokens": r.Output, "stream": true,
			"metadata": map[string]any{"user_id": r.Session},
			"messages": []any{map[string]any{"role": "user", "content": o.Detokenize(r.Prompt)}}})
		return b, "/v1/messages"
	}
	b, _ := json.Marshal(map[string]any{"model": o.Model, "prompt": r.Prompt, "max_tokens": r.Output, "ignore_eos": true,
		"stream": true, "stream_options": map[string]any{"include_usage": true}, "user": r.Session})
	return b, "/v1/completions"
}

// streamEvent covers the fields of OpenAI chunks and Anthropic events we read.
type streamEvent struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Type  string `json:"type"`
	Delta struct {
		Text string `json:"text"`
	} `json:"delta"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		Details          struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		CacheRead    int `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Message *struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Error *json.RawMessage `json:"error"`
}

func (e *streamEvent) hasText() bool {
	if e.Type == "content_block_delta" {
		return e.Delta.Text != ""
	}
	for _, c := range e.Choices {
		if c.Text != "" || c.Delta.Content != "" {
			return true
		}
	}
	return false
}

type seenUsage struct{ prompt, cached, output int }

func (e *streamEvent) usage() *seenUsage {
	switch {
	case e.Usage != nil:
		u := e.Usage
		return &seenUsage{prompt: max(u.PromptTokens, u.InputTokens), cached: max(u.Details.Cached, u.CacheRead),
			output: max(u.CompletionTokens, u.OutputTokens)}
	case e.Message != nil:
		return &seenUsage{prompt: e.Message.Usage.InputTokens}
	}
	return nil
}
