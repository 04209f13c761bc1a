package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kvgate/kvgate/dataplane/api"
)

// Output parsing of chats: which tool-call syntax and whether <think>
// reasoning apply are read once from the chat template (as vLLM's
// --tool-call-parser and --reasoning-parser would be set for the model),
// unless ToolParser or ReasoningParser name them; each Model has its own.
type parserChoice struct {
	once      sync.Once
	tools     *api.ToolSyntax
	reasoning bool
}

// ReasoningParsers are the names ReasoningParser takes besides "" (from
// the template) and "none"; both read <think>...</think>.
var ReasoningParsers = []string{"qwen3", "deepseek_r1"}

func (m *Model) parsers() *parserChoice {
	m.choice.once.Do(func() {
		src := ""
		if t := m.Tok.Chat(); t != nil {
			src = t.Source()
		}
		switch m.ToolParser {
		case "":
			m.choice.tools = api.ToolSyntaxOf(src)
		default:
			m.choice.tools, _ = api.ToolSyntaxNamed(m.ToolParser) // validated by the flags (Model.Check)
		}
		switch m.ReasoningParser {
		case "":
			m.choice.reasoning = strings.Contains(src, api.ThinkEnd)
		case "none":
		default:
			m.choice.reasoning = true
		}
	})
	return &m.choice
}

// outputParser is the parser chain of a chat's output for model m:
// reasoning when the model thinks, tool calls when the request offered
// tools it may call. prompt is the rendered prompt.
func outputParser(m *Model, req *api.Request, prompt string) *api.OutputParser {
	if req.Kind == api.Completion {
		return &plainOutput
	}
	c := m.parsers()
	tools := c.tools != nil && req.Conversation.HasTools() && !req.NoToolCalls
	if !c.reasoning && !tools {
		return &plainOutput
	}
	o := &api.OutputParser{}
	if c.reasoning {
		o.Reasoning = api.NewReasoningParser(prompt)
	}
	if tools {
		o.Tools = api.NewToolParser(c.tools)
	}
	return o
}

// plainOutput is the parser of every output that is all text: with
// neither a reasoning nor a tool parser, Feed writes none of its fields,
// so requests share it.
var plainOutput api.OutputParser

// CheckParsers refuses a ToolParser or ReasoningParser name the gateway
// does not know.
func CheckParsers(tool, reasoning string) error {
	if _, err := api.ToolSyntaxNamed(tool); err != nil {
		return err
	}
	if reasoning == "" || reasoning == "none" || slices.Contains(ReasoningParsers, reasoning) {
		return nil
	}
	return fmt.Errorf("gateway: unknown reasoning parser %q (qwen3, deepseek_r1 or none)", reasoning)
}
