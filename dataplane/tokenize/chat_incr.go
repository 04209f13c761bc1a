package tokenize

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Incremental chat rendering.
//
// A client sends the whole conversation on every turn, so turn N's
// messages are turn N-1's plus the assistant's reply and a new user
// message. For a template that is append-only on plain conversations
// (its probes say so, chat_probe.go), the rendering of turn N is the
// rendering of turn N-1 without its generation prompt (remembered in a
// prefixCache) followed by what the new messages add. What they add is
// found by rendering a short conversation: the head (the system message,
// if any, and the first user message, which templates read to place the
// system prompt and check that roles alternate), or a placeholder head of
// the same roles where the probes allow (chat_short.go), and the new
// messages; what it renders past the head's own rendering is the new text. The
// dropped messages are an even number of whole user-assistant pairs, so
// every parity the template checks is unchanged.
//
// A conversation takes this path only when it is plain (every message
// exactly a role and a string content holding none of the template's
// markup literals, chat_markers.go; a system message only first; user and
// assistant alternating; ending on a user message), has no tools and asks
// for the generation prompt; anything else, and any check that fails on
// the way, is rendered in full. Every remembered prefix is plain: a
// prefix is kept only after its whole conversation was checked.

// chatTurn is one request's conversation, split where the cache needs it.
type chatTurn struct {
	c     *ChatTemplate
	in    *ChatInput
	v     *appendOnly
	pc    *prefixCache
	raw   []byte // in.Messages without surrounding whitespace
	extra string // the template variables, as a cache key
	// headEnd is the offset in raw just past the head's last message;
	// heads is how many messages the head holds (1 or 2).
	headEnd, heads int
	// last is the offset just past the last message (before the ']').
	last int
	// from is the remembered prefix the rendering continued, next the one
	// it left for the next turn (either nil).
	from, next *chatPrefix
}

// newTurn returns the turn when in may take the incremental path, else
// nil. It reads the head messages' roles only: a remembered prefix that
// the messages start with had its contents checked, and remember checks
// them before the first.
func (c *ChatTemplate) newTurn(pc *prefixCache, v *appendOnly, extra string, in *ChatInput) *chatTurn {
	if !v.ok || !in.AddGenerationPrompt || (len(in.Tools) > 0 && string(bytes.TrimSpace(in.Tools)) != "null") {
		return nil
	}
	raw := bytes.TrimSpace(in.Messages)
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil
	}
	t := &chatTurn{c: c, in: in, v: v, pc: pc, raw: raw, extra: extra, last: endOf(raw, len(raw)-1)}
	end, more, ok := nextElement(raw, 1)
	if !ok {
		return nil
	}
	role, _, _, err := plainRole(trimElement(raw, 1, end))
	if err != nil {
		return nil
	}
	t.headEnd, t.heads = endOf(raw, end), 1
	if role == "system" {
		if !more || !v.system {
			return nil
		}
		end2, _, ok := nextElement(raw, end+1)
		if !ok {
			return nil
		}
		if r, _, _, err := plainRole(trimElement(raw, end+1, end2)); err != nil || r != "user" {
			return nil
		}
		t.headEnd, t.heads = endOf(raw, end2), 2
	} else if role != "user" {
		return nil
	}
	return t
}

// message returns the role of the message in raw[start:end] when it is
// plain and its content holds none of the template's markers.
func (t *chatTurn) message(start, end int) (string, bool) {
	role, content, escaped, err := plainRole(trimElement(t.raw, start, end))
	if err != nil || !cleanContent(content, escaped, &t.c.markers) {
		return "", false
	}
	return role, true
}

// tail checks the messages that follow raw[:from] and a ',': plain,
// alternating from firstRole, ending on a user message, then the final
// ']'.
func (t *chatTurn) tail(from int, firstRole string) bool {
	at, ok := commaAt(t.raw, from)
	if !ok {
		return false
	}
	want := firstRole
	for {
		end, more, ok := nextElement(t.raw, at+1)
		if !ok {
			return false
		}
		role, ok := t.message(at+1, end)
		if !ok || role != want {
			return false
		}
		if !more {
			return endOf(t.raw, end) == t.last && role == "user"
		}
		if want = "user"; role == "user" {
			want = "assistant"
		}
		at = end
	}
}

// render returns the rendering from a remembered prefix, or false when
// there is none or a check fails.
func (t *chatTurn) render() (string, bool) {
	p := t.pc.longest(t.extra, t.raw, t.headEnd)
	if p == nil || !t.tail(len(p.raw), "assistant") {
		return "", false
	}
	comma, _ := commaAt(t.raw, len(p.raw))
	short, base, placeholder := t.shortInput(comma)
	if !placeholder {
		base = p.head
		if !p.headKnown {
			h, err := t.sub(append(bytes.Clone(t.raw[:t.headEnd]), ']'), false)
			if err != nil {
				return "", false
			}
			base = h
		}
		short = make([]byte, 0, t.headEnd+len(t.raw)-comma)
		short = append(append(short, t.raw[:t.headEnd]...), t.raw[comma:]...)
	}
	s, err := t.sub(short, true)
	if err != nil || !strings.HasPrefix(s, base) {
		return "", false
	}
	have, g := bytesOf(p.text), (*growth)(nil)
	if p.textArr != nil {
		have, g = p.textArr, &p.textGrown
	}
	buf, owns := grow(g, have, bytesOf(s[len(base):]))
	out := stringOf(buf)
	head, headKnown := base, !placeholder
	if placeholder {
		head, headKnown = p.head, p.headKnown
	}
	t.from = p
	if !t.keep(out, head, headKnown, buf, owns) {
		t.from = nil
		return "", false
	}
	return out, true
}

// remember keeps a full rendering of the turn for the next one.
func (t *chatTurn) remember(out string) {
	if t.cleanHead() && (t.headEnd == t.last || t.tail(t.headEnd, "assistant")) {
		t.keep(out, "", false, nil, false)
	}
}

// cleanHead reports whether the head messages' contents hold no marker.
func (t *chatTurn) cleanHead() bool {
	at := 1
	for range t.heads {
		end, _, ok := nextElement(t.raw, at)
		if !ok {
			return false
		}
		if _, ok := t.message(at, end); !ok {
			return false
		}
		at = end + 1
	}
	return true
}

// keep stores out without its generation prompt as the prefix that ends
// at the final message; buf, when not nil, is out's bytes, whose room
// past them is the prefix's to grow into if owns.
func (t *chatTurn) keep(out, head string, headKnown bool, buf []byte, owns bool) bool {
	text, ok := strings.CutSuffix(out, t.v.gen)
	if !ok {
		return false
	}
	var have []byte
	var g *growth
	if t.from != nil {
		have, g = t.from.raw, &t.from.grown
	}
	raw, ownsRaw := grow(g, have, t.raw[len(have):t.last])
	t.next = &chatPrefix{extra: t.extra, raw: raw, headEnd: t.headEnd, text: text, head: head, headKnown: headKnown}
	t.next.grown.init(ownsRaw, 0)
	if buf != nil {
		t.next.textArr = buf[:len(text)]
		t.next.textGrown.init(owns, len(buf))
	}
	t.pc.put(t.next)
	return true
}

// sub renders messages (a JSON array) with the turn's variables.
func (t *chatTurn) sub(messages []byte, gen bool) (string, error) {
	return t.c.renderFull(&ChatInput{Messages: json.RawMessage(messages), AddGenerationPrompt: gen, Extra: t.in.Extra})
}
