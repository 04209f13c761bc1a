package tokenize

import "encoding/json"

// Short heads.
//
// The incremental render evaluates the template over the head and the new
// messages (chat_incr.go). Most templates read the head only to place the
// system prompt and to check roles, so its contents change nothing past
// its own rendering; then a fixed placeholder head of the same roles does
// as well, and its short contents make the evaluation cheaper (the
// engine's cost grows with the messages and the text it moves). Some need
// no head at all: the new messages, which start with an assistant reply,
// render alone as they render after the others. Which a template takes is
// probed per template, variables and head size, like the rest: every
// probe conversation rendered turn by turn that way must equal its full
// rendering. Where neither does, the turn's own head is rendered.

// headKind is what the short evaluation puts before a turn's new
// messages.
type headKind uint8

const (
	ownHead         headKind = iota // the turn's own head messages
	placeholderHead                 // placeholderHeads
	noHead                          // nothing: the new messages alone
)

// placeholderHeads are the placeholder heads, without the closing ']':
// one user message, and a system message and a user message.
var placeholderHeads = [2]string{
	`[{"role":"user","content":"Hi."}`,
	`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi."}`,
}

// probeShort decides v.short[heads-1] for the conversations convs, whose
// heads are heads messages long and which v already renders append-only:
// no head if that renders them all as in full, else the placeholder if
// that does.
func (c *ChatTemplate) probeShort(v *appendOnly, convs [][]plainMessage, heads int, extra map[string]json.RawMessage) {
	for _, kind := range []headKind{noHead, placeholderHead} {
		messages := "[]"
		if kind == placeholderHead {
			messages = placeholderHeads[heads-1] + "]"
		}
		base, err := c.renderFull(&ChatInput{Messages: json.RawMessage(messages), Extra: extra})
		if err != nil {
			continue
		}
		trial := *v
		trial.ok, trial.system = true, true
		trial.short[heads-1], trial.base[heads-1] = kind, base
		if c.probeTurns(&trial, convs, extra) {
			v.short[heads-1], v.base[heads-1] = kind, base
			return
		}
	}
}

// shortInput returns the messages the template evaluates for a turn whose
// new messages start at raw[comma] (the ',' before them), and the
// rendering that their text follows, where the probes allow a short head;
// else ok is false (the caller renders the turn's own head).
func (t *chatTurn) shortInput(comma int) (short []byte, base string, ok bool) {
	kind := t.v.short[t.heads-1]
	switch kind {
	case placeholderHead:
		head := placeholderHeads[t.heads-1]
		short = make([]byte, 0, len(head)+len(t.raw)-comma)
		short = append(append(short, head...), t.raw[comma:]...)
	case noHead:
		short = make([]byte, 0, 1+len(t.raw)-comma)
		short = append(append(short, '['), t.raw[comma+1:]...)
	default:
		return nil, "", false
	}
	return short, t.v.base[t.heads-1], true
}
