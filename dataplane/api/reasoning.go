package api

import "strings"

// ReasoningParser splits a thinking model's reasoning out of its output:
// the text between <think> and </think> (Qwen3, DeepSeek R1, QwQ). As
// vLLM's qwen3 and deepseek_r1 reasoning parsers do, reasoning must open
// the output: a model whose prompt already ends in <think> (DeepSeek R1's
// template, Qwen3's thinking-only models) starts inside it, one whose
// prompt closed it (Qwen3 with enable_thinking false) writes only text,
// and a <think> later in the text is text. Reasoning the output ends in
// (max_tokens) stays reasoning.
type ReasoningParser struct {
	start, end string
	state      reasonState
	held       string
}

type reasonState uint8

const (
	reasonMaybe reasonState = iota // the output may open with <think>
	reasonIn                       // inside the reasoning
	reasonAfter                    // after it: the spaces before the text
	reasonDone                     // text only
)

// Think tags of the models that think.
const (
	ThinkStart = "<think>"
	ThinkEnd   = "</think>"
)

// NewReasoningParser splits <think> reasoning; prompt is the rendered
// prompt, whose end says whether the output starts inside it.
func NewReasoningParser(prompt string) *ReasoningParser {
	p := &ReasoningParser{start: ThinkStart, end: ThinkEnd}
	tail := strings.TrimRight(prompt, " \t\r\n")
	switch {
	case strings.HasSuffix(tail, ThinkStart):
		p.state = reasonIn
	case strings.HasSuffix(tail, ThinkEnd):
		p.state = reasonDone
	}
	return p
}

// Feed takes the next output text and appends its pieces: reasoning, and
// text (which a tool parser may take next).
func (p *ReasoningParser) Feed(dst []Piece, text string, last bool) []Piece {
	s := p.held + text
	p.held = ""
	for s != "" {
		switch p.state {
		case reasonMaybe:
			t := strings.TrimLeft(s, " \t\r\n")
			if rest, ok := strings.CutPrefix(t, p.start); ok {
				p.state, s = reasonIn, rest
				continue
			}
			if !last && len(t) < len(p.start) && strings.HasPrefix(p.start, t) {
				p.held = s
				return dst
			}
			p.state = reasonDone
		case reasonIn:
			if before, after, ok := strings.Cut(s, p.end); ok {
				dst = appendPiece(dst, PieceReasoning, before)
				p.state, s = reasonAfter, after
				continue
			}
			keep := 0
			if !last {
				keep = heldPrefix(s, []string{p.end})
			}
			p.held = s[len(s)-keep:]
			return appendPiece(dst, PieceReasoning, s[:len(s)-keep])
		case reasonAfter:
			if s = strings.TrimLeft(s, " \t\r\n"); s != "" {
				p.state = reasonDone
			}
		case reasonDone:
			return appendPiece(dst, PieceText, s)
		}
	}
	return dst
}

func appendPiece(dst []Piece, k PieceKind, s string) []Piece {
	if s == "" {
		return dst
	}
	if n := len(dst); n > 0 && dst[n-1].Kind == k && k != PieceToolCall {
		dst[n-1].Text += s
		return dst
	}
	return append(dst, Piece{Kind: k, Text: s})
}

// OutputParser is the chain a chat's output text goes through: reasoning
// split out first, then tool calls found in the rest. Either may be nil.
type OutputParser struct {
	Reasoning *ReasoningParser
	Tools     *ToolParser
	scratch   []Piece
}

// Feed takes the next output text and appends its pieces.
func (o *OutputParser) Feed(dst []Piece, text string, last bool) []Piece {
	if o.Reasoning == nil && o.Tools == nil {
		return appendPiece(dst, PieceText, text)
	}
	if o.Reasoning == nil {
		return o.Tools.Feed(dst, text, last)
	}
	o.scratch = o.Reasoning.Feed(o.scratch[:0], text, last)
	if o.Tools == nil {
		return append(dst, o.scratch...)
	}
	sawText := false
	for _, p := range o.scratch {
		if p.Kind == PieceText {
			dst, sawText = o.Tools.Feed(dst, p.Text, last), true
		} else {
			dst = append(dst, p)
		}
	}
	if last && !sawText {
		dst = o.Tools.Feed(dst, "", true)
	}
	return dst
}

// ToolCalls is the number of tool calls found so far.
func (o *OutputParser) ToolCalls() int {
	if o == nil || o.Tools == nil {
		return 0
	}
	return o.Tools.Calls()
}
