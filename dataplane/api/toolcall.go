package api

import (
	"encoding/json"
	"strings"
)

// ToolParser finds a model's tool calls in its output text as it streams
// and splits the text into Pieces: answer text, and tool calls whose
// arguments stream as the model writes them.
//
// A call is sent on as soon as its function name is known; its arguments
// follow while they are valid JSON. What turns out malformed is text:
// a call none of which was sent yet (in one Feed, a whole response) is
// given back as the text the model wrote, a call whose name was already
// streamed ends where its arguments went wrong, the rest being text. After
// a malformed call the parser passes all further text through, as vLLM
// treats the whole output as content when a call does not parse.
type ToolParser struct {
	syn     *ToolSyntax
	markers []string // open, then drop
	mode    toolMode
	held    string          // text held back: a possible marker start, spaces
	raw     string          // the current call since its opening marker
	rawb    strings.Builder // holds raw: appending never copies it again
	open    string          // the marker that opened it
	pos     int             // bytes of raw consumed by the call's parse
	args    int             // start of the arguments in raw; -1 before the head
	sent    int             // bytes of arguments emitted
	scan    jsonScanner
	whole   bool // parsing the call object whole (keys out of order)
	named   bool // the call's first piece is out (in this Feed or before)
	calls   int
	// callOut is where the current call's pieces begin in this Feed's
	// output, committed says its head went out in an earlier Feed.
	callOut   int
	committed bool
}

type toolMode uint8

const (
	modeStart   toolMode = iota // nothing seen yet
	modeText                    // text, looking for a call's marker
	modeCall                    // inside a call
	modeBetween                 // just after a call
	modePlain                   // text only, to the end
)

// NewToolParser parses output written in syn.
func NewToolParser(syn *ToolSyntax) *ToolParser {
	return &ToolParser{syn: syn, args: -1, markers: append([]string{syn.open}, syn.drop...)}
}

// Calls is the number of tool calls found so far.
func (p *ToolParser) Calls() int { return p.calls }

// Feed takes the next output text and appends the pieces it completes;
// last says no more text follows.
func (p *ToolParser) Feed(dst []Piece, text string, last bool) []Piece {
	p.callOut = len(dst)
	for {
		var more bool
		switch p.mode {
		case modeStart:
			dst, text, more = p.start(dst, text, last)
		case modeText:
			dst, text, more = p.text(dst, text, last)
		case modeBetween:
			dst, text, more = p.between(dst, text, last)
		case modeCall:
			dst, text, more = p.call(dst, text, last)
		case modePlain:
			dst = appendText(dst, p.held+text)
			p.held, text = "", ""
		}
		if !more {
			break
		}
	}
	if p.mode == modeCall && p.named {
		p.committed = true
	}
	return dst
}

func appendText(dst []Piece, s string) []Piece {
	if s == "" {
		return dst
	}
	if n := len(dst); n > 0 && dst[n-1].Kind == PieceText {
		dst[n-1].Text += s
		return dst
	}
	return append(dst, Piece{Kind: PieceText, Text: s})
}

// start decides, for syntaxes whose calls open the output (Llama), whether
// the output is calls or text.
func (p *ToolParser) start(dst []Piece, text string, last bool) ([]Piece, string, bool) {
	if p.syn.open != "" {
		p.mode = modeText
		return dst, text, true
	}
	s := p.held + text
	p.held = ""
	t := strings.TrimLeft(s, " \t\r\n")
	if !last && (t == "" || len(t) < len(p.syn.lead) && strings.HasPrefix(p.syn.lead, t)) {
		p.held = s // undecided
		return dst, "", false
	}
	if rest, tagged := strings.CutPrefix(t, p.syn.lead); tagged && p.syn.lead != "" {
		p.beginCall(s[:len(s)-len(rest)], len(dst))
		return dst, rest, true
	}
	if strings.HasPrefix(t, "{") {
		p.beginCall(s[:len(s)-len(t)], len(dst))
		return dst, t, true
	}
	p.mode = modePlain
	return dst, s, true
}

func (p *ToolParser) beginCall(open string, out int) {
	p.mode, p.open, p.raw, p.pos, p.args, p.sent = modeCall, open, "", 0, -1, 0
	p.rawb.Reset()
	p.scan, p.whole, p.named, p.committed, p.callOut = jsonScanner{}, false, false, false, out
}

// text passes text on up to a call's opening marker, holding back what
// may be the start of one, and drops the syntax's other markers.
func (p *ToolParser) text(dst []Piece, text string, last bool) ([]Piece, string, bool) {
	if p.syn.open == "" { // calls open the output only (Llama): this is text
		p.mode = modePlain
		return dst, text, true
	}
	s := p.held + text
	p.held = ""
	at, marker := -1, ""
	for _, m := range p.markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, marker = i, m
		}
	}
	if at >= 0 {
		dst = appendText(dst, s[:at])
		if marker != p.syn.open {
			return dst, s[at+len(marker):], true
		}
		p.beginCall(marker, len(dst))
		return dst, s[at+len(marker):], true
	}
	keep := 0
	if !last {
		keep = heldPrefix(s, p.markers)
	}
	p.held = s[len(s)-keep:]
	return appendText(dst, s[:len(s)-keep]), "", false
}

// heldPrefix is the length of the longest end of s that begins a marker.
func heldPrefix(s string, markers []string) int {
	best := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(s)); k > best; k-- {
			if strings.HasSuffix(s, m[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// between drops the white space after a call; a syntax that separates
// calls (Llama's ";") starts the next one there.
func (p *ToolParser) between(dst []Piece, text string, last bool) ([]Piece, string, bool) {
	s := strings.TrimLeft(p.held+text, " \t\r\n")
	p.held = ""
	switch {
	case s == "":
		return dst, "", false
	case p.syn.sep != "" && strings.HasPrefix(s, p.syn.sep):
		p.beginCall(p.syn.sep, len(dst))
		return dst, s[len(p.syn.sep):], true
	case p.syn.sep != "" && strings.HasPrefix(p.syn.sep, s) && !last:
		p.held = s
		return dst, "", false
	case p.syn.open == "":
		p.mode = modePlain
	default:
		p.mode = modeText
	}
	return dst, s, true
}

// call parses the current call with text appended: its head, then its
// arguments (streamed), then its end.
func (p *ToolParser) call(dst []Piece, text string, last bool) ([]Piece, string, bool) {
	p.rawb.WriteString(text)
	p.raw = p.rawb.String() // earlier pieces keep pointing at their bytes
	if p.args < 0 && !p.whole {
		name, args, st := p.syn.head(p.raw)
		switch {
		case st == syntaxNeed && len(p.raw) > maxToolHead:
			st = syntaxBad
		case st == syntaxNeed:
			return p.needMore(dst, last)
		}
		if st == syntaxBad {
			if !p.syn.object {
				return p.fail(dst), "", true
			}
			p.whole = true
		} else {
			p.args, p.pos = args, args
			dst = append(dst, Piece{Kind: PieceToolCall, Index: p.calls, Name: name})
			p.calls, p.named = p.calls+1, true
		}
	}
	if p.whole && !p.named {
		return p.callWhole(dst, last)
	}
	if !p.whole && !p.scan.done() {
		n, done, bad := p.scan.feed(p.raw[p.pos:])
		p.pos += n
		if bad || done && !json.Valid([]byte(p.raw[p.args:p.pos])) {
			return p.fail(dst), "", true
		}
		if p.pos > p.sent+p.args {
			dst = append(dst, Piece{Kind: PieceToolCall, Index: p.calls - 1, Text: p.raw[p.args+p.sent : p.pos]})
			p.sent = p.pos - p.args
		}
		if !done {
			return p.needMore(dst, last)
		}
	}
	return p.end(dst, last)
}

// maxToolHead bounds the text before a call's arguments.
const maxToolHead = 4096

func (p *ToolParser) needMore(dst []Piece, last bool) ([]Piece, string, bool) {
	if last {
		return p.fail(dst), "", true
	}
	return dst, "", false
}

// end parses what follows the arguments: the call object's close, the
// syntax's end marker.
func (p *ToolParser) end(dst []Piece, last bool) ([]Piece, string, bool) {
	rest := p.raw[p.pos:]
	skip := 0
	if p.syn.object && !p.whole {
		t := strings.TrimLeft(rest, " \t\r\n")
		switch {
		case t == "":
			return p.needMore(dst, last)
		case t[0] != '}':
			return p.fail(dst), "", true
		}
		skip = len(rest) - len(t) + 1
	}
	n, st := p.syn.tail(rest[skip:], last)
	switch st {
	case syntaxNeed:
		return p.needMore(dst, last)
	case syntaxBad:
		return p.fail(dst), "", true
	}
	after := rest[skip+n:]
	p.mode, p.raw = modeBetween, ""
	p.rawb.Reset()
	return dst, after, true
}

// callWhole parses a call object whose keys are not in the streaming
// order (arguments before name): it is scanned to its end, then decoded.
func (p *ToolParser) callWhole(dst []Piece, last bool) ([]Piece, string, bool) {
	if p.args < 0 {
		t := strings.TrimLeft(p.raw, " \t\r\n")
		p.args = len(p.raw) - len(t) // the object's start
		p.pos = p.args
	}
	n, done, bad := p.scan.feed(p.raw[p.pos:])
	p.pos += n
	if bad {
		return p.fail(dst), "", true
	}
	if !done {
		return p.needMore(dst, last)
	}
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal([]byte(p.raw[p.args:p.pos]), &c) != nil || c.Name == "" {
		return p.fail(dst), "", true
	}
	args := c.Arguments
	if args == nil {
		args = c.Parameters
	}
	if len(args) == 0 || args[0] != '{' {
		return p.fail(dst), "", true
	}
	dst = append(dst, Piece{Kind: PieceToolCall, Index: p.calls, Name: c.Name},
		Piece{Kind: PieceToolCall, Index: p.calls, Text: string(args)})
	p.calls, p.named = p.calls+1, true
	return p.end(dst, last)
}

// fail gives a malformed call back as text: all of it when none of it
// was sent, else what follows the arguments sent. Text after it is plain.
func (p *ToolParser) fail(dst []Piece) []Piece {
	if p.committed {
		dst = appendText(dst, p.raw[p.args+p.sent:])
	} else {
		if p.named {
			p.calls--
		}
		dst = appendText(dst[:p.callOut], p.open+p.raw)
	}
	p.mode, p.raw, p.held = modePlain, "", ""
	p.rawb.Reset()
	return dst
}

func (s *jsonScanner) done() bool { return s.state == scanDone }
