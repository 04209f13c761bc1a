package tokenize

import "encoding/json"

// Short heads.
//
// The incremental render evaluates the template over the head and the new
// messages (chat_incr.go). Most templates read the head only to place the
// system prompt and to check roles, so its contents change nothing past
// its own rendering; then a fixed placeholder head of the same roles does
// as well, and its short contents make the evaluation cheaper (the
// engine's cost grows with the text it moves). Whether it does is probed
// per template, variables and head size, like the rest: every probe
// conversation rendered turn by turn with the placeholder must equal its
// full rendering. Where it does not, the turn's own head is rendered.

// placeholderHeads are the heads the short evaluation puts before a
// turn's new messages, without the closing ']': one user message, and a
// system message and a user message.
var placeholderHeads = [2]string{
	`[{"role":"user","content":"Hi."}`,
	`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi."}`,
}

// probeShort decides v.short[heads-1] for the conversations convs, whose
// heads are heads messages long and which v already renders append-only.
func (c *ChatTemplate) probeShort(v *appendOnly, convs [][]plainMessage, heads int, extra map[string]json.RawMessage) {
	base, err := c.renderFull(&ChatInput{Messages: json.RawMessage(placeholderHeads[heads-1] + "]"), Extra: extra})
	if err != nil {
		return
	}
	trial := *v
	trial.ok, trial.system = true, true
	trial.short[heads-1], trial.base[heads-1] = true, base
	if c.probeTurns(&trial, convs, extra) {
		v.short[heads-1], v.base[heads-1] = true, base
	}
}

// shortInput returns the messages the template evaluates for a turn whose
// new messages start at raw[comma] (the ',' before them), and the
// rendering that their text follows: the placeholder head and its
// rendering where the probes allow, else nil and "" (the caller renders
// its own head).
func (t *chatTurn) shortInput(comma int) ([]byte, string, bool) {
	if !t.v.short[t.heads-1] {
		return nil, "", false
	}
	head := placeholderHeads[t.heads-1]
	short := make([]byte, 0, len(head)+len(t.raw)-comma)
	short = append(append(short, head...), t.raw[comma:]...)
	return short, t.v.base[t.heads-1], true
}
