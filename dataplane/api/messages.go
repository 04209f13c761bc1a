package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvgate/kvgate/dataplane/media"
)

// normalizeMessages checks the messages and flattens content given as a
// list of parts into one string (text parts joined by newlines, as vLLM
// does for string-content templates), keeping every other key in order;
// content with images stays a list (media.go), its images read into
// sink (nil: refused). Plain messages are read by the walker
// (normalizePlain); any other list by encoding/json (normalizeJSON), the
// two giving the same bytes and the same errors.
func normalizeMessages(raw json.RawMessage, sink *imageSink) (json.RawMessage, error) {
	var images []Image
	if sink != nil {
		images = sink.images
	}
	if out, ok, err := normalizePlain(raw, sink); ok {
		return out, err
	}
	if sink != nil {
		sink.images = images // forget what the walker read before it gave up
	}
	return normalizeJSON(raw, sink)
}

// normalizeJSON is normalizeMessages by encoding/json.
func normalizeJSON(raw json.RawMessage, sink *imageSink) (json.RawMessage, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("messages must be a non-empty list of message objects")
	}

	var out bytes.Buffer
	out.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := normalizeMessage(&out, m, i, sink); err != nil {
			return nil, err
		}
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

func normalizeMessage(out *bytes.Buffer, m json.RawMessage, i int, sink *imageSink) error {
	d := json.NewDecoder(bytes.NewReader(m))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("messages[%d] must be an object", i)
	}
	out.WriteByte('{')
	n := newMessageState(i, sink)
	for first := true; d.More(); first = false {
		k, _ := d.Token()
		key, _ := k.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("messages[%d].%s: %v", i, key, err)
		}
		v, err := n.member(key, v)
		if err != nil {
			return err
		}
		if !first {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	if err := n.check(); err != nil {
		return err
	}
	out.WriteByte('}')
	return nil
}

// messageState is what normalizing message i learns from its members.
type messageState struct {
	i            int
	sink         *imageSink
	images       int // the sink's images before this message
	role, callID string
}

func newMessageState(i int, sink *imageSink) messageState {
	n := messageState{i: i, sink: sink}
	if sink != nil {
		n.images = len(sink.images)
	}
	return n
}

// member checks one member of the message and returns the value to
// write for it.
func (n *messageState) member(key string, v json.RawMessage) (json.RawMessage, error) {
	i := n.i
	switch key {
	case "role":
		if v[0] == '"' && fastString(v, &n.role) {
			break
		}
		if json.Unmarshal(v, &n.role) != nil {
			return nil, fmt.Errorf("messages[%d].role must be a string", i)
		}
	case "content":
		if v[0] != '[' { // what flattenContent leaves as it is
			break
		}
		field := fmt.Sprintf("messages[%d].content", i)
		flat, err := flattenContent(v, field, n.sink)
		if _, named := err.(*fieldError); named {
			return nil, err
		} else if err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
		v = flat
	case "tool_calls":
		calls, err := normalizeToolCalls(v, i)
		if err != nil {
			return nil, err
		}
		v = calls
	case "tool_call_id":
		if v[0] != '"' || !fastString(v, &n.callID) {
			_ = json.Unmarshal(v, &n.callID)
		}
	}
	return v, nil
}

// check is the message's verdict once its members are read.
func (n *messageState) check() error {
	i, role, sink := n.i, n.role, n.sink
	if sink != nil && len(sink.images) > n.images && role != "user" {
		return fieldErrorf(sink.images[n.images].Field, "images belong to user messages, not %s", role)
	}
	switch role {
	case "tool":
		if n.callID == "" {
			return fieldErrorf(fmt.Sprintf("messages[%d].tool_call_id", i), "a message of role tool needs the tool_call_id it answers")
		}
	case "system", "user", "assistant", "developer":
	default:
		return fmt.Errorf("messages[%d].role %q is not system, user, assistant or tool", i, role)
	}
	return nil
}

// flattenContent turns a list of text parts into one string; a string
// stays as it is. With sink, image_url parts are read into it (each
// named field[j]) and the content stays a list of text and image parts.
func flattenContent(v json.RawMessage, field string, sink *imageSink) (json.RawMessage, error) {
	if len(v) == 0 || v[0] != '[' {
		return v, nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(v, &parts); err != nil {
		return nil, fmt.Errorf("content parts must be objects with type and text")
	}
	texts := make([]string, 0, len(parts))
	list := make([]contentPart, 0, len(parts))
	images := 0
	for j, p := range parts {
		switch {
		case p.Type == "text":
			texts = append(texts, p.Text)
			list = append(list, textPart(p.Text))
			continue
		case sink == nil:
			return nil, fmt.Errorf("content part type %q is not supported here (text only)", p.Type)
		case p.Type == "image_url" && !sink.placed:
			src, err := media.ParseOpenAIImage(p.ImageURL)
			if err := sink.addImage(fmt.Sprintf("%s[%d]", field, j), src, err); err != nil {
				return nil, err
			}
		case p.Type == "image" && sink.placed:
		default:
			return nil, fmt.Errorf("content part type %q is not supported (text, image_url)", p.Type)
		}
		list = append(list, contentPart{Type: "image"})
		images++
	}
	if images > 0 {
		return json.Marshal(list)
	}
	return json.Marshal(strings.Join(texts, "\n"))
}

// normalizeToolCalls reads an assistant's tool_calls and gives each
// call's arguments to the template as an object, as vLLM does (OpenAI
// sends them as a JSON string; templates print them with tojson).
func normalizeToolCalls(v json.RawMessage, i int) (json.RawMessage, error) {
	if string(v) == "null" {
		return v, nil
	}
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &calls); err != nil {
		return nil, fieldErrorf(fmt.Sprintf("messages[%d].tool_calls", i), "must be a list of {id, type, function: {name, arguments}}")
	}
	for j := range calls {
		f := &calls[j].Function
		field := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
		if f.Name == "" {
			return nil, fieldErrorf(field+".name", "is required")
		}
		var s string
		if json.Unmarshal(f.Arguments, &s) == nil {
			f.Arguments = json.RawMessage(s)
		}
		if len(f.Arguments) == 0 {
			f.Arguments = json.RawMessage(`{}`)
		}
		var obj map[string]json.RawMessage
		if f.Arguments[0] != '{' || json.Unmarshal(f.Arguments, &obj) != nil {
			return nil, fieldErrorf(field+".arguments", "must be a JSON object (or a string holding one)")
		}
		if calls[j].Type == "" {
			calls[j].Type = "function"
		}
	}
	return json.Marshal(calls)
}
