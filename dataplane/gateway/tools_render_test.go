package gateway

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// TestToolConversationsRender: an Anthropic tool loop and the same loop
// in OpenAI's shape render to one prompt, in Qwen3's own format (tools in
// <tools>, the call in <tool_call>, the result in <tool_response>), as HF
// transformers' apply_chat_template renders the OpenAI one.
func TestToolConversationsRender(t *testing.T) {
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	anth, e := api.DecodeMessages([]byte(`{"model":"m","max_tokens":9,"system":"Be brief.","tools":[`+anthTool+`],"messages":[`+askWeather+`,
		{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"And tomorrow?"}]}]}`), nil)
	if e != nil {
		t.Fatal(e)
	}
	oai, e := api.DecodeChat([]byte(`{"model":"m","tools":[`+weatherTool+`],"chat_template_kwargs":{"enable_thinking":false},"messages":[
		{"role":"system","content":"Be brief."},`+askWeather+`,
		{"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"toolu_1","content":"sunny"},{"role":"user","content":"And tomorrow?"}]}`), nil)
	if e != nil {
		t.Fatal(e)
	}
	render := func(c *api.Conversation) string {
		s, err := tok.Chat().Render(&tokenize.ChatInput{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: true, Extra: c.Kwargs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, o := render(&anth.Conversation), render(&oai.Conversation)
	if a != o {
		t.Fatalf("anthropic renders\n%s\nopenai renders\n%s", a, o)
	}
	for _, want := range []string{
		"<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>",
		"<|im_start|>assistant\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>",
		"<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>user\nAnd tomorrow?<|im_end|>",
		"<|im_start|>assistant\n<think>\n\n</think>\n\n",
	} {
		if !strings.Contains(a, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, a)
		}
	}
}
