package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// normalizeMessages checks the messages and flattens content given as a
// list of parts into one string (text parts joined by newlines, as vLLM
// does for string-content templates), keeping every other key in order.
func normalizeMessages(raw json.RawMessage) (json.RawMessage, error) {
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
		if err := normalizeMessage(&out, m, i); err != nil {
			return nil, err
		}
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

func normalizeMessage(out *bytes.Buffer, m json.RawMessage, i int) error {
	d := json.NewDecoder(bytes.NewReader(m))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("messages[%d] must be an object", i)
	}
	out.WriteByte('{')
	role := ""
	for first := true; d.More(); first = false {
		k, _ := d.Token()
		key, _ := k.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("messages[%d].%s: %v", i, key, err)
		}
		switch key {
		case "role":
			if json.Unmarshal(v, &role) != nil {
				return fmt.Errorf("messages[%d].role must be a string", i)
			}
		case "content":
			flat, err := flattenContent(v)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %v", i, err)
			}
			v = flat
		}
		if !first {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	switch role {
	case "system", "user", "assistant", "tool", "developer":
	default:
		return fmt.Errorf("messages[%d].role %q is not system, user, assistant or tool", i, role)
	}
	out.WriteByte('}')
	return nil
}

// flattenContent turns a list of text parts into one string; a string
// stays as it is.
func flattenContent(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 || v[0] != '[' {
		return v, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(v, &parts); err != nil {
		return nil, fmt.Errorf("content parts must be objects with type and text")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return nil, fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return json.Marshal(strings.Join(texts, "\n"))
}
