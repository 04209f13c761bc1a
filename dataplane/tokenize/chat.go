package tokenize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ardanlabs/jinja"
)

// ChatTemplate renders a model's Jinja chat template. It uses
// github.com/ardanlabs/jinja, a Go Jinja engine written for these templates;
// its output equals @huggingface/jinja's on the corpus in testdata (the
// chat golden test). JSON objects keep their key order, so tools render
// with `tojson` exactly as Python's json.dumps would print them.
//
// Render is incremental for plain conversations under templates that
// render them append-only (chat_incr.go): a turn whose earlier turns were
// rendered before renders only its new messages, with the same result.
type ChatTemplate struct {
	tmpl     *jinja.Template
	bos, eos string
	source   string
	prefixes *prefixCache
	verdicts verdicts
	markers  markerSet                  // markup literals no content on the incremental path holds
	added    atomic.Pointer[addedFacts] // the tokenizer's added tokens, as chat_encode.go needs them
	clock    func() time.Time           // what strftime_now reads: time.Now but in tests
	strftime jinja.Value                // strftime_now, reading clock
}

// Source is the template's text (the gateway reads which tool-call and
// reasoning syntax it teaches the model).
func (c *ChatTemplate) Source() string { return c.source }

// NewChatTemplate compiles a template.
func NewChatTemplate(source, bos, eos string) (*ChatTemplate, error) {
	t, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("%w: chat template: %v", ErrInvalid, err)
	}
	c := &ChatTemplate{tmpl: t, bos: bos, eos: eos, source: source, prefixes: newPrefixCache(prefixCacheMaxBytes),
		markers: templateMarkers(source), clock: time.Now}
	c.strftime = strftimeNow(func() time.Time { return c.clock() })
	return c, nil
}

// chatTemplateSource reads chat_template as a string, or picks the
// "default" entry of a list of named templates.
func chatTemplateSource(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("%w: chat_template is neither a string nor a list", ErrInvalid)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	if len(named) > 0 {
		return named[0].Template, nil
	}
	return "", nil
}

// ChatInput is what a chat request gives the template. Messages and Tools
// are raw JSON arrays, so their objects keep the client's key order.
type ChatInput struct {
	Messages            json.RawMessage
	Tools               json.RawMessage
	AddGenerationPrompt bool
	// Extra are further template variables from JSON (chat_template_kwargs,
	// for example enable_thinking).
	Extra map[string]json.RawMessage
	// Tenant is whose conversation this is (the credential it came with,
	// say): renderings remembered for one tenant's next turn are never
	// looked up for another's, so neither can time its way to what the
	// other sent.
	Tenant string
}

// Render returns the prompt text. It is safe for concurrent use.
func (c *ChatTemplate) Render(in *ChatInput) (string, error) {
	r, err := c.render(in)
	return r.text, err
}

// render renders in through the template's prefix cache.
func (c *ChatTemplate) render(in *ChatInput) (chatRender, error) {
	if !in.AddGenerationPrompt || (len(in.Tools) > 0 && string(bytes.TrimSpace(in.Tools)) != "null") {
		text, err := c.renderFull(in) // never incremental: spare the probes
		return chatRender{text: text}, err
	}
	key := extraKey(in.Extra)
	return c.turn(c.prefixes, c.verdict(key, in.Extra), cacheKey(in.Tenant, key), in)
}

// cacheKey is the prefix cache's key of a tenant's turn whose template
// variables are extra (an extraKey).
func cacheKey(tenant, extra string) string {
	if tenant == "" {
		return extra
	}
	return strconv.Itoa(len(tenant)) + ":" + tenant + extra
}

// chatRender is a turn's rendering: the text, the remembered prefix it
// continued (nil when rendered in full) and the prefix it left in the
// cache for the next turn (nil when none).
type chatRender struct {
	text       string
	from, next *chatPrefix
}

// turn renders in from a prefix remembered in pc under key when it can,
// else in full, remembering the result for the next turn.
func (c *ChatTemplate) turn(pc *prefixCache, v *appendOnly, key string, in *ChatInput) (chatRender, error) {
	t := c.newTurn(pc, v, key, in)
	if t != nil {
		if out, ok := t.render(); ok {
			return chatRender{text: out, from: t.from, next: t.next}, nil
		}
	}
	out, err := c.renderFull(in)
	if err == nil && t != nil {
		t.remember(out)
		return chatRender{text: out, next: t.next}, nil
	}
	return chatRender{text: out}, err
}

// renderTurn is turn, saying whether it rendered incrementally.
func (c *ChatTemplate) renderTurn(pc *prefixCache, v *appendOnly, key string, in *ChatInput) (string, bool, error) {
	r, err := c.turn(pc, v, key, in)
	return r.text, r.from != nil, err
}

// renderFull renders the whole conversation.
func (c *ChatTemplate) renderFull(in *ChatInput) (string, error) {
	data := map[string]jinja.Value{
		"bos_token":             jinja.NewString(c.bos),
		"eos_token":             jinja.NewString(c.eos),
		"add_generation_prompt": jinja.NewBool(in.AddGenerationPrompt),
		"strftime_now":          c.strftime,
	}
	for k, raw := range in.Extra {
		v, err := jsonValue(raw)
		if err != nil {
			return "", fmt.Errorf("chat template variable %s: %w", k, err)
		}
		data[k] = v
	}
	msgs, err := jsonValue(in.Messages)
	if err != nil {
		return "", fmt.Errorf("chat messages: %w", err)
	}
	data["messages"] = msgs
	if len(in.Tools) > 0 && string(in.Tools) != "null" {
		tools, err := jsonValue(in.Tools)
		if err != nil {
			return "", fmt.Errorf("chat tools: %w", err)
		}
		data["tools"] = tools
	}
	out, err := c.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("rendering chat template: %w", err)
	}
	return out, nil
}

// jsonValue converts JSON to a template value, keeping object key order and
// integer-ness of numbers.
func jsonValue(raw json.RawMessage) (jinja.Value, error) {
	if v, err := fastJSONValue(raw); err == nil {
		return v, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 64

func decodeValue(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var items []jinja.Value
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return v, err
				}
				items = append(items, v)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
		obj := jinja.NewDict()
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return obj, err
			}
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return v, err
			}
			obj.AsDict().Set(k.(string), v)
		}
		_, err := d.Token()
		return obj, err
	case json.Number:
		return jinja.FromGoValue(t), nil
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}
