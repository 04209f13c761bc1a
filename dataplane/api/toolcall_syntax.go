package api

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToolSyntax is how one model family writes tool calls in its output,
// read from vLLM's parsers of the same names (vllm-project/vllm
// vllm/entrypoints/openai/tool_parsers/: hermes_tool_parser.py at 0085432,
// llama_tool_parser.py at 02de3de, deepseekv3_tool_parser.py at 061b11d).
type ToolSyntax struct {
	// Name is the parser's name, as vLLM's --tool-call-parser takes it.
	Name string
	// open starts a call anywhere in the text; "" for a syntax whose calls
	// are the whole output (Llama), optionally after lead.
	open, lead string
	// sep starts another call right after one (Llama's ";").
	sep string
	// drop are markers around calls that are not text.
	drop []string
	// object says a call is one JSON object {"name", "arguments"}.
	object bool
	// head finds the function's name and the start of the arguments in a
	// call's text after its marker.
	head func(body string) (name string, args int, st syntaxState)
	// tail matches what ends a call after its arguments (and, for object
	// syntaxes, the object's close): n bytes of rest.
	tail func(rest string, last bool) (n int, st syntaxState)
}

type syntaxState uint8

const (
	syntaxOK syntaxState = iota
	syntaxNeed
	syntaxBad
)

// Hermes is Hermes 2 Pro's and Qwen2.5's and Qwen3's syntax:
// <tool_call>{"name": "f", "arguments": {...}}</tool_call>, one block a
// call; the closing tag may be missing at the end of the output.
var Hermes = &ToolSyntax{Name: "hermes", open: "<tool_call>", object: true, head: objectHead,
	tail: func(rest string, last bool) (int, syntaxState) { return closeTag(rest, last, "</tool_call>", true) }}

// Llama3JSON is Llama 3.1's and later JSON tool calls: the whole output
// is {"name": "f", "parameters": {...}} (or "arguments"), calls separated
// by ";", optionally after <|python_tag|>.
var Llama3JSON = &ToolSyntax{Name: "llama3_json", lead: "<|python_tag|>", sep: ";", object: true, head: objectHead,
	tail: func(string, bool) (int, syntaxState) { return 0, syntaxOK }}

// DeepSeekV3 is DeepSeek V3's tool-call tokens:
// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>.
var DeepSeekV3 = &ToolSyntax{Name: "deepseek_v3", open: "<｜tool▁call▁begin｜>",
	drop: []string{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"}, head: deepSeekHead, tail: deepSeekTail}

var toolSyntaxes = []*ToolSyntax{Hermes, Llama3JSON, DeepSeekV3}

// ToolSyntaxNamed returns the syntax of a parser name ("deepseekv3", vLLM's
// spelling, works too); "none" and "" give nil.
func ToolSyntaxNamed(name string) (*ToolSyntax, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "deepseekv3":
		return DeepSeekV3, nil
	case "llama4_json":
		return Llama3JSON, nil
	}
	for _, s := range toolSyntaxes {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("api: unknown tool parser %q (hermes, llama3_json, deepseek_v3 or none)", name)
}

// ToolSyntaxOf picks the syntax a chat template teaches its model: the
// markers it renders tool calls with.
func ToolSyntaxOf(template string) *ToolSyntax {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes
	case strings.Contains(template, "<｜tool▁call▁begin｜>"):
		return DeepSeekV3
	case strings.Contains(template, "<|python_tag|>") || strings.Contains(template, "ipython"):
		return Llama3JSON
	}
	return nil
}

// objectHead reads {"name": "f", "arguments": up to the arguments' '{'.
func objectHead(body string) (string, int, syntaxState) {
	c := cursor{s: body}
	var name string
	steps := []func() syntaxState{
		func() syntaxState { return c.lit("{") },
		func() syntaxState { return c.lit(`"name"`) },
		func() syntaxState { return c.lit(":") },
		func() (st syntaxState) { name, st = c.str(); return st },
		func() syntaxState { return c.lit(",") },
		func() syntaxState {
			if st := c.lit(`"arguments"`); st != syntaxBad {
				return st
			}
			return c.lit(`"parameters"`)
		},
		func() syntaxState { return c.lit(":") },
		func() syntaxState { c.ws(); return c.peek('{') },
	}
	for _, step := range steps {
		if st := step(); st != syntaxOK {
			return "", 0, st
		}
	}
	if name == "" {
		return "", 0, syntaxBad
	}
	return name, c.i, syntaxOK
}

// deepSeekHead reads function<｜tool▁sep｜>NAME\n```json\n.
func deepSeekHead(body string) (string, int, syntaxState) {
	typ, rest, ok := strings.Cut(body, "<｜tool▁sep｜>")
	if !ok {
		if strings.ContainsAny(body, "\n<") && !strings.HasSuffix(body, "<") && !isPrefixEnd(body, "<｜tool▁sep｜>") {
			return "", 0, syntaxBad
		}
		return "", 0, syntaxNeed
	}
	if strings.TrimSpace(typ) != "function" {
		return "", 0, syntaxBad
	}
	name, after, ok := strings.Cut(rest, "\n")
	if !ok {
		return "", 0, syntaxNeed
	}
	const fence = "```json\n"
	if len(after) < len(fence) {
		if strings.HasPrefix(fence, after) {
			return "", 0, syntaxNeed
		}
		return "", 0, syntaxBad
	}
	if !strings.HasPrefix(after, fence) || strings.TrimSpace(name) == "" {
		return "", 0, syntaxBad
	}
	return strings.TrimSpace(name), len(body) - len(after) + len(fence), syntaxOK
}

// isPrefixEnd reports whether s ends with a proper prefix of marker.
func isPrefixEnd(s, marker string) bool { return heldPrefix(s, []string{marker}) > 0 }

// deepSeekTail reads \n```<｜tool▁call▁end｜>.
func deepSeekTail(rest string, last bool) (int, syntaxState) {
	c := cursor{s: rest}
	if st := c.lit("```"); st != syntaxOK {
		return 0, st
	}
	return closeTagAt(&c, last, "<｜tool▁call▁end｜>", false)
}

// closeTag matches white space and a closing tag; optional says the end
// of the output may stand for it.
func closeTag(rest string, last bool, tag string, optional bool) (int, syntaxState) {
	c := cursor{s: rest}
	return closeTagAt(&c, last, tag, optional)
}

func closeTagAt(c *cursor, last bool, tag string, optional bool) (int, syntaxState) {
	c.ws()
	if c.i == len(c.s) && last && optional {
		return c.i, syntaxOK
	}
	st := c.lit(tag)
	if st == syntaxNeed && last {
		st = syntaxBad
	}
	return c.i, st
}

// cursor reads a call's head, which may be cut anywhere.
type cursor struct {
	s string
	i int
}

func (c *cursor) ws() {
	for c.i < len(c.s) && isSpace(c.s[c.i]) {
		c.i++
	}
}

// lit matches x after white space.
func (c *cursor) lit(x string) syntaxState {
	c.ws()
	rest := c.s[c.i:]
	switch {
	case strings.HasPrefix(rest, x):
		c.i += len(x)
		return syntaxOK
	case strings.HasPrefix(x, rest):
		return syntaxNeed
	}
	return syntaxBad
}

func (c *cursor) peek(b byte) syntaxState {
	switch {
	case c.i == len(c.s):
		return syntaxNeed
	case c.s[c.i] == b:
		return syntaxOK
	}
	return syntaxBad
}

// str reads a JSON string after white space.
func (c *cursor) str() (string, syntaxState) {
	c.ws()
	if st := c.peek('"'); st != syntaxOK {
		return "", st
	}
	var sc jsonScanner
	n, done, bad := sc.feed(c.s[c.i:])
	switch {
	case bad:
		return "", syntaxBad
	case !done && sc.state != scanAfter:
		return "", syntaxNeed
	}
	var v string
	if json.Unmarshal([]byte(c.s[c.i:c.i+n]), &v) != nil {
		return "", syntaxBad
	}
	c.i += n
	return v, syntaxOK
}
