package tokenize

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// appendOnly is a template's verdict, for one set of template variables:
// whether plain conversations without a system message (ok) and with one
// (system) render append-only, and the generation prompt that a
// rendering with add_generation_prompt ends with.
type appendOnly struct {
	ok, system bool
	gen        string
	// short[h-1] is what a turn whose head is h messages renders its new
	// messages after, and base[h-1] that head's rendering (chat_short.go).
	short [2]headKind
	base  [2]string
}

// verdicts holds a template's appendOnly verdicts by template variables.
type verdicts struct {
	mu sync.Mutex
	m  map[string]*appendOnly
}

// maxVerdicts bounds the sets of template variables probed per template;
// past it, new sets are rendered in full.
const maxVerdicts = 64

var notAppendOnly = &appendOnly{}

// extraKey is a cache key of the template variables: sorted names and
// their JSON as sent.
func extraKey(extra map[string]json.RawMessage) string {
	if len(extra) == 0 {
		return ""
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte(0)
		b.Write(extra[k])
		b.WriteByte(0)
	}
	return b.String()
}

// verdict returns the template's verdict for extra, probing it the first
// time.
func (c *ChatTemplate) verdict(key string, extra map[string]json.RawMessage) *appendOnly {
	c.verdicts.mu.Lock()
	v, ok := c.verdicts.m[key]
	full := len(c.verdicts.m) >= maxVerdicts
	c.verdicts.mu.Unlock()
	if ok {
		return v
	}
	if full {
		return notAppendOnly
	}
	v = c.probe(extra) // outside the lock: two first requests may both probe
	c.verdicts.mu.Lock()
	if c.verdicts.m == nil {
		c.verdicts.m = make(map[string]*appendOnly)
	}
	c.verdicts.m[key] = v
	c.verdicts.mu.Unlock()
	return v
}

// Probe conversations: contents chosen to touch what templates branch on
// (empty text, surrounding whitespace, reasoning tags, other templates'
// markers, quotes, non-ASCII).
var (
	probeSystem    = []string{"You are a helpful assistant.\nAnswer briefly.", " "}
	probeUser      = []string{"Hello!", "  What is 2+2? \"quoted\" <tag> [INST] {{ x }}\n", "", "日本語で説明してください。", "And then?"}
	probeAssistant = []string{"Hi there.", "<think>\nLet me add.\n</think>\n\nIt is 4.", "", " trailing space \n", "line one\nline two </s>"}
)

// probeTurns is the longest probe conversation, in user turns.
const probeTurns = 5

// probe decides whether plain conversations render append-only under the
// template with extra, for conversations without a system message and,
// apart, with one (a template may refuse those).
func (c *ChatTemplate) probe(extra map[string]json.RawMessage) *appendOnly {
	for _, marker := range []string{"strftime_now", "now("} {
		if strings.Contains(c.source, marker) {
			return notAppendOnly // the rendering changes with the clock
		}
	}
	v := &appendOnly{}
	if !c.probeClass(v, probeConversations(""), extra) {
		return notAppendOnly
	}
	v.ok = true
	var withSystem [][]plainMessage
	for _, s := range probeSystem {
		withSystem = append(withSystem, probeConversations(s)...)
	}
	v.system = c.probeClass(v, withSystem, extra)
	c.probeShort(v, probeConversations(""), 1, extra)
	if v.system {
		c.probeShort(v, withSystem, 2, extra)
	}
	return v
}

// probeConversations are plain conversations of probeTurns user turns,
// after a system message when system is not empty.
func probeConversations(system string) [][]plainMessage {
	var convs [][]plainMessage
	for rot := range 2 {
		var m []plainMessage
		if system != "" {
			m = append(m, plainMessage{"system", system})
		}
		for i := range probeTurns {
			if i > 0 {
				m = append(m, plainMessage{"assistant", probeAssistant[(i+rot)%len(probeAssistant)]})
			}
			m = append(m, plainMessage{"user", probeUser[(i+2*rot)%len(probeUser)]})
		}
		convs = append(convs, m)
	}
	return convs
}

// probeClass checks convs: every full rendering ends with the same
// generation prompt (v.gen, set by the first class probed), and
// probeTurns.
func (c *ChatTemplate) probeClass(v *appendOnly, convs [][]plainMessage, extra map[string]json.RawMessage) bool {
	for _, m := range convs {
		for n := len(m); n > 0; n -= 2 {
			full, err := c.renderFull(probeInput(m[:n], true, extra))
			if err != nil {
				return false
			}
			bare, err := c.renderFull(probeInput(m[:n], false, extra))
			if err != nil || !strings.HasPrefix(full, bare) || (v.ok && full[len(bare):] != v.gen) {
				return false
			}
			v.gen = full[len(bare):]
		}
	}
	return c.probeTurns(&appendOnly{ok: true, system: true, gen: v.gen}, convs, extra)
}

// probeTurns feeds each conversation of convs to a private cache turn by
// turn, and again skipping turns, and reports whether each later turn of
// a clean conversation renders through the incremental path under trial,
// and every turn exactly as in full.
func (c *ChatTemplate) probeTurns(trial *appendOnly, convs [][]plainMessage, extra map[string]json.RawMessage) bool {
	key := extraKey(extra)
	for _, m := range convs {
		for _, step := range []int{2, 4} {
			pc := newPrefixCache(1 << 20)
			first := 1 // the head: the first user message, after the system message if any
			if m[0].Role == "system" {
				first = 2
			}
			for n := first; n <= len(m); n += step {
				in := probeInput(m[:n], true, extra)
				want, _ := c.renderFull(in)
				got, incremental, err := c.renderTurn(pc, trial, key, in)
				if err != nil || got != want || incremental != (n > first && c.clean(m[:n])) {
					return false
				}
			}
		}
	}
	return true
}

// clean reports whether no content of m holds a marker of the template.
func (c *ChatTemplate) clean(m []plainMessage) bool {
	for _, msg := range m {
		if !cleanContent([]byte(msg.Content), false, &c.markers) {
			return false
		}
	}
	return true
}

func probeInput(m []plainMessage, gen bool, extra map[string]json.RawMessage) *ChatInput {
	raw, _ := json.Marshal(m)
	return &ChatInput{Messages: raw, AddGenerationPrompt: gen, Extra: extra}
}
