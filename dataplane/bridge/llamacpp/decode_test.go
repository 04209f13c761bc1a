package llamacpp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// nonStream is a captured non-streamed answer: the ids llama.cpp itself
// reports for the request.
func nonStream(t testing.TB, name string) event {
	t.Helper()
	var ev event
	if err := json.Unmarshal(golden(t, name+".json"), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// streamRun is what decoding a stream gave.
type streamRun struct {
	end    streamEnd
	err    error
	events []event
}

func runStream(r io.Reader) streamRun {
	var out streamRun
	out.end, out.err = decodeStream(r, func(ev *event) error {
		out.events = append(out.events, *ev)
		return nil
	})
	return out
}

// TestDecodeStreamGolden decodes the captured streams: the events, the
// last one's report, the error event, in whole reads and byte by byte.
func TestDecodeStreamGolden(t *testing.T) {
	for _, c := range []struct {
		name      string
		end       streamEnd
		events    int
		predicted int
	}{
		{"completion", streamDone, 13, 12},
		{"completion_utf8_gaps", streamDone, 3, 8},
		{"completion_emoji", streamDone, 5, 10},
		{"completion_error", streamEngineError, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := golden(t, c.name+".sse")
			for _, r := range []io.Reader{bytes.NewReader(b), iotest.OneByteReader(bytes.NewReader(b))} {
				got := runStream(r)
				if got.end != c.end || len(got.events) != c.events {
					t.Fatalf("end %d (%v) after %d events, want %d after %d", got.end, got.err, len(got.events), c.end, c.events)
				}
				if c.end != streamDone {
					if !strings.Contains(got.err.Error(), "Content-only") {
						t.Fatalf("error event: %v", got.err)
					}
					continue
				}
				last := got.events[len(got.events)-1]
				want := nonStream(t, c.name)
				if !last.Stop || last.TokensPredicted != c.predicted || last.IDSlot < 0 || last.TokensCached != want.TokensCached ||
					last.TokensEvaluated != want.TokensEvaluated || last.StopType != want.StopType || last.Timings == nil {
					t.Fatalf("last event %+v, non-streamed %+v", last, want)
				}
				for _, ev := range got.events[:len(got.events)-1] {
					if ev.Stop || ev.IDSlot != -1 || len(ev.Tokens) != 1 || ev.Timings == nil {
						t.Fatalf("event %+v", ev)
					}
				}
			}
		})
	}
}

// TestDecodeStreamEnds: a stream cut mid-line or before its last event is
// cut, a line that is no event malformed, impossible counts malformed, and
// the handler's refusal stops it.
func TestDecodeStreamEnds(t *testing.T) {
	first := strings.SplitAfter(string(golden(t, "completion.sse")), "\n\n")[0]
	refuse := errors.New("no")
	for _, c := range []struct {
		name, in string
		fn       func(*event) error
		end      streamEnd
	}{
		{"cut-between", first, nil, streamCut},
		{"cut-inside", first[:len(first)/2], nil, streamCut},
		{"not-json", "data: {nope\n\n", nil, streamMalformed},
		{"negative", `data: {"tokens":[1],"tokens_predicted":-1}` + "\n\n", nil, streamMalformed},
		{"negative-id", `data: {"tokens":[-1],"tokens_predicted":1}` + "\n\n", nil, streamMalformed},
		{"refused", first, func(*event) error { return refuse }, streamRefused},
		{"pings", ": ping\n\n" + first + ":\n\n" + `data: {"stop":true,"tokens":[]}` + "\n\n", nil, streamDone},
	} {
		t.Run(c.name, func(t *testing.T) {
			fn := c.fn
			if fn == nil {
				fn = func(*event) error { return nil }
			}
			end, err := decodeStream(strings.NewReader(c.in), fn)
			if end != c.end || (end == streamDone) != (err == nil) {
				t.Fatalf("end %d, %v; want %d", end, err, c.end)
			}
			if c.end == streamRefused && !errors.Is(err, refuse) {
				t.Fatalf("refusal lost: %v", err)
			}
		})
	}
}

// TestDecodeAnswersGolden decodes the captured /props, /v1/models,
// /slots, /metrics and /tokenize answers and the HTTP error of a prompt
// over the context.
func TestDecodeAnswersGolden(t *testing.T) {
	p, err := DecodeProps(golden(t, "props.json"))
	if err != nil || p.TotalSlots != 2 || p.Settings.NCtx != 2048 || p.BuildInfo != "b1-80fb11a" || !p.EndpointSlots ||
		!p.EndpointMetrics || p.EOSToken != "<|im_end|>" || p.ModelAlias != testModel {
		t.Fatalf("props %+v, %v", p, err)
	}
	m, err := DecodeModels(golden(t, "models.json"))
	if err != nil || m.Owner() != "llamacpp" || !slices.Contains(m.Names(), testModel) || m.VocabSize() != 151669 {
		t.Fatalf("models %+v, %v", m, err)
	}
	for _, c := range []struct {
		name              string
		tasks, processing []int
	}{
		{"slots_fresh.json", []int{-1, -1}, nil},
		{"slots_idle.json", nil, nil},
		{"slots_busy.json", nil, []int{0}},
	} {
		slots, err := DecodeSlots(golden(t, c.name))
		if err != nil || len(slots) != 2 {
			t.Fatalf("%s: %v %v", c.name, slots, err)
		}
		var busy []int
		for i, s := range slots {
			if s.IsProcessing {
				busy = append(busy, i)
			}
			if c.tasks != nil && s.TaskID() != c.tasks[i] || c.tasks == nil && s.TaskID() < 0 || s.NCtx != 2048 {
				t.Fatalf("%s: slot %d %+v", c.name, i, s)
			}
		}
		if fmt.Sprint(busy) != fmt.Sprint(c.processing) {
			t.Fatalf("%s: processing %v, want %v", c.name, busy, c.processing)
		}
	}
	busy, _ := DecodeSlots(golden(t, "slots_busy.json"))
	if s := busy[0]; s.NPromptTokens != 400 || s.started() {
		t.Fatalf("busy slot %+v: 400 tokens added, not begun", s)
	}
	for name, processing := range map[string]float64{"metrics.txt": 0, "metrics_busy.txt": 1} {
		mt, err := ParseMetrics(bytes.NewReader(golden(t, name)))
		if err != nil || !mt.Found || mt.Processing != processing || mt.Deferred != 0 || mt.PromptTokens == 0 {
			t.Fatalf("%s: %+v %v", name, mt, err)
		}
	}
	ids, err := DecodeTokenize(golden(t, "tokenize.json"))
	if want := builtin(t).Encode(nil, "Hello 世界 <|im_start|>", false); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("/tokenize %v %v, kvgate %v", ids, err, want)
	}
	status, body, _ := strings.Cut(string(golden(t, "completion_too_long.txt")), "\n")
	if status != "HTTP 400" || !strings.Contains(errorMessage([]byte(body)), "exceeds the available context size") {
		t.Fatalf("%s %q", status, errorMessage([]byte(body)))
	}
}

// TestDecodeRefusesOthers: answers that are not llama.cpp's, or not sane.
func TestDecodeRefusesOthers(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		fn   func() error
	}{
		{"vllm-props", ErrNotLlamaCpp, func() error { _, err := DecodeProps([]byte(`{"detail":"Not Found"}`)); return err }},
		{"props-slots", ErrSchema, func() error {
			_, err := DecodeProps([]byte(`{"build_info":"b1-x","total_slots":99999,"default_generation_settings":{"n_ctx":1}}`))
			return err
		}},
		{"props-json", ErrSchema, func() error { _, err := DecodeProps([]byte(`[`)); return err }},
		{"slots-order", ErrSchema, func() error { _, err := DecodeSlots([]byte(`[{"id":1}]`)); return err }},
		{"slots-negative", ErrSchema, func() error { _, err := DecodeSlots([]byte(`[{"id":0,"n_prompt_tokens":-3}]`)); return err }},
		{"slots-object", ErrSchema, func() error { _, err := DecodeSlots([]byte(`{"id":0}`)); return err }},
		{"tokenize-error", ErrSchema, func() error {
			_, err := DecodeTokenize([]byte(`{"error":{"code":400,"message":"bad","type":"x"}}`))
			return err
		}},
	} {
		if err := c.fn(); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}
