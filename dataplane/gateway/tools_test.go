package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const (
	weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	weatherArgs = `{"city": "sim"}`
	anthTool    = `{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	askWeather  = `{"role":"user","content":"Weather in Paris?"}`
)

func decodeJSON(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

// sseData is the JSON of each data: event of a stream but [DONE].
func sseData(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(stream, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var v map[string]any
		decodeJSON(t, d, &v)
		out = append(out, v)
	}
	return out
}

// TestOpenAIToolCalls: the engine's Qwen tool call comes back as
// tool_calls with finish_reason tool_calls, its <think> block as
// reasoning_content, whole and streamed alike.
func TestOpenAIToolCalls(t *testing.T) {
	base := startGatewayWith(t, gwOptions{tools: true}).base
	body := `{"model":"` + model + `","messages":[` + askWeather + `],"tools":[` + weatherTool + `]`
	resp, out := post(t, base+"/v1/chat/completions", "", body+`}`)
	var whole struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				Reasoning string  `json:"reasoning_content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	decodeJSON(t, out, &whole)
	c := whole.Choices[0]
	if resp.StatusCode != 200 || c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	call := c.Message.ToolCalls[0]
	if call.Type != "function" || call.ID == "" || call.Function.Name != "get_weather" || call.Function.Arguments != weatherArgs ||
		c.Message.Reasoning != "\nThe user offered tools; calling get_weather.\n" {
		t.Fatalf("call %+v reasoning %q", call, c.Message.Reasoning)
	}

	_, stream := post(t, base+"/v1/chat/completions", "", body+`,"stream":true}`)
	var reasoning, args, name, id, finish string
	for _, ev := range sseData(t, stream) {
		for _, ch := range ev["choices"].([]any) {
			ch := ch.(map[string]any)
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
			delta := ch["delta"].(map[string]any)
			if r, ok := delta["reasoning_content"].(string); ok {
				reasoning += r
			}
			for _, tc := range asList(delta["tool_calls"]) {
				tc := tc.(map[string]any)
				if tc["index"] != 0.0 {
					t.Fatalf("tool call index %v", tc["index"])
				}
				if i, ok := tc["id"].(string); ok {
					if id != "" {
						t.Fatal("two deltas carry the call's id")
					}
					id, name = i, tc["function"].(map[string]any)["name"].(string)
				}
				args += tc["function"].(map[string]any)["arguments"].(string)
			}
		}
	}
	if finish != "tool_calls" || name != "get_weather" || id == "" || args != weatherArgs || reasoning != c.Message.Reasoning {
		t.Fatalf("stream: finish %q name %q id %q args %q reasoning %q\n%s", finish, name, id, args, reasoning, stream)
	}

	// Thinking off (Qwen3's enable_thinking): the call alone.
	_, out = post(t, base+"/v1/chat/completions", "", body+`,"chat_template_kwargs":{"enable_thinking":false}}`)
	if !strings.Contains(out, `"finish_reason":"tool_calls"`) || strings.Contains(out, "reasoning_content") {
		t.Fatalf("thinking off: %s", out)
	}

	// tool_choice none: the same output is text.
	_, out = post(t, base+"/v1/chat/completions", "", body+`,"tool_choice":"none"}`)
	if !strings.Contains(out, `"content":"\u003ctool_call\u003e`) || strings.Contains(out, `"tool_calls"`) {
		t.Fatalf("tool_choice none: %s", out)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestAnthropicToolLoop: tool_use, then the client's tool_result, then
// the answer, whole; and the same turn streamed with thinking on.
func TestAnthropicToolLoop(t *testing.T) {
	base := startGatewayWith(t, gwOptions{tools: true}).base
	head := `{"model":"` + model + `","max_tokens":200,"tools":[` + anthTool + `],`
	resp, out := post(t, base+"/v1/messages", "", head+`"messages":[`+askWeather+`]}`)
	var msg struct {
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		} `json:"content"`
	}
	decodeJSON(t, out, &msg)
	if resp.StatusCode != 200 || msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" ||
		msg.Content[0].Name != "get_weather" || string(msg.Content[0].Input) != `{"city":"sim"}` {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	use, _ := json.Marshal(msg.Content)
	turn2 := head + `"messages":[` + askWeather + `,{"role":"assistant","content":` + string(use) + `},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + msg.Content[0].ID + `","content":[{"type":"text","text":"sunny"}]}]}]}`
	_, out = post(t, base+"/v1/messages", "", turn2)
	decodeJSON(t, out, &msg)
	if msg.StopReason != "end_turn" || msg.Content[0].Type != "text" || msg.Content[0].Text != "The tool answered: sunny" {
		t.Fatalf("answer %s", out)
	}
	failed := strings.Replace(turn2, `"content":[{"type":"text","text":"sunny"}]`, `"content":"no such city","is_error":true`, 1)
	_, out = post(t, base+"/v1/messages", "", failed)
	if !strings.Contains(out, "The tool answered: Error: no such city") {
		t.Fatalf("is_error: %s", out)
	}

	_, stream := post(t, base+"/v1/messages", "", head+`"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[`+askWeather+`]}`)
	var kinds []string
	var thinking, input, stop string
	for _, ev := range sseData(t, stream) {
		switch ev["type"] {
		case "content_block_start":
			kinds = append(kinds, ev["content_block"].(map[string]any)["type"].(string))
		case "content_block_delta":
			d := ev["delta"].(map[string]any)
			switch d["type"] {
			case "thinking_delta":
				thinking += d["thinking"].(string)
			case "input_json_delta":
				input += d["partial_json"].(string)
			}
		case "message_delta":
			stop = ev["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if fmt.Sprint(kinds) != "[thinking tool_use]" || input != weatherArgs || stop != "tool_use" || !strings.Contains(thinking, "calling get_weather") {
		t.Fatalf("stream blocks %v input %q stop %q thinking %q\n%s", kinds, input, stop, thinking, stream)
	}
}

// TestStopStringUsage: a stop string that ends generation leaves the
// tokens generated counted, and Anthropic names it.
func TestStopStringUsage(t *testing.T) {
	base := startGatewayWith(t, gwOptions{tools: true}).base
	_, out := post(t, base+"/v1/chat/completions", "", `{"model":"`+model+`","messages":[`+askWeather+`],"tools":[`+weatherTool+`],"stop":["calling"]}`)
	var chat struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	decodeJSON(t, out, &chat)
	if chat.Usage.Completion == 0 || chat.Choices[0].FinishReason != "stop" || chat.Choices[0].Message.Reasoning != "\nThe user offered tools; " {
		t.Fatalf("%s", out)
	}
	for _, stream := range []bool{false, true} {
		resp, out := post(t, base+"/v1/messages", "", fmt.Sprintf(`{"model":%q,"max_tokens":100,"stream":%v,"stop_sequences":["sim"],"tools":[%s],"messages":[%s]}`,
			model, stream, anthTool, askWeather))
		final := out[strings.LastIndex(out, `"output_tokens":`):] // message_start's is 0
		if !strings.Contains(out, `"stop_reason":"stop_sequence","stop_sequence":"sim"`) || strings.HasPrefix(final, `"output_tokens":0`) {
			t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, out)
		}
		// Whole, a call the stop string cut is text; streamed, its name
		// may have gone out before the cut (the tokens came in more than
		// one frame), and the call ends there.
		text := strings.Contains(out, `\u003ctool_call\u003e`)
		if !stream && !text || stream && !text && !strings.Contains(out, `"name":"get_weather","type":"tool_use"`) {
			t.Fatalf("stream %v: the call cut by the stop string: %s", stream, out)
		}
	}
}

// TestTokenizeTools: /tokenize renders tools as a chat does, so its ids
// are the prompt the engine is sent.
func TestTokenizeTools(t *testing.T) {
	base := startGateway(t, nil)
	msgs := `"messages":[` + askWeather + `],"tools":[` + weatherTool + `]`
	_, tk := post(t, base+"/tokenize", "", `{"model":"`+model+`",`+msgs+`}`)
	_, bare := post(t, base+"/tokenize", "", `{"model":"`+model+`","messages":[`+askWeather+`]}`)
	_, chat := post(t, base+"/v1/chat/completions", "", `{"model":"`+model+`","max_tokens":1,`+msgs+`}`)
	var a, b struct{ Count int }
	var c struct {
		Usage struct {
			Prompt int `json:"prompt_tokens"`
		}
	}
	decodeJSON(t, tk, &a)
	decodeJSON(t, bare, &b)
	decodeJSON(t, chat, &c)
	if a.Count != c.Usage.Prompt || a.Count <= b.Count+20 {
		t.Fatalf("tokenize with tools %d, without %d, the chat's prompt %d", a.Count, b.Count, c.Usage.Prompt)
	}
	_, m := post(t, base+"/v1/messages", "", `{"model":"`+model+`","max_tokens":1,"tools":[`+anthTool+`],"messages":[`+askWeather+`]}`)
	_, mb := post(t, base+"/v1/messages", "", `{"model":"`+model+`","max_tokens":1,"messages":[`+askWeather+`]}`)
	var u, ub struct {
		Usage struct {
			Input int `json:"input_tokens"`
		}
	}
	decodeJSON(t, m, &u)
	decodeJSON(t, mb, &ub)
	if u.Usage.Input <= ub.Usage.Input+20 {
		t.Fatalf("anthropic tools do not reach the prompt: %d with, %d without", u.Usage.Input, ub.Usage.Input)
	}
}
