package api

import "strings"

// StopMatcher finds stop strings in streamed text, holding back the tail
// that could be the start of one, so no part of a stop string reaches the
// client.
type StopMatcher struct {
	stops   []string
	maxLen  int
	pending string
	matched string
}

// noStops is the matcher of every request without stop strings: Feed
// returns before it writes a field when there are none.
var noStops StopMatcher

// Active reports whether there are stop strings to match.
func (m *StopMatcher) Active() bool { return m.maxLen > 0 }

// Matched is the stop string that ended the output, "" while none has.
func (m *StopMatcher) Matched() string { return m.matched }

// NewStopMatcher matches stops; with none, Feed passes text through.
// Without stops every caller shares one matcher, which nothing writes.
func NewStopMatcher(stops []string) *StopMatcher {
	if len(stops) == 0 {
		return &noStops
	}
	m := &StopMatcher{stops: stops}
	for _, s := range stops {
		m.maxLen = max(m.maxLen, len(s))
	}
	return m
}

// Feed takes new text and returns what may be sent, and whether a stop
// string ended the output (the stop string itself is not sent). last says
// no more text follows: everything held back is released.
func (m *StopMatcher) Feed(text string, last bool) (string, bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	m.pending += text
	cut := -1
	for _, s := range m.stops {
		if s == "" {
			continue
		}
		if i := strings.Index(m.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut, m.matched = i, s
		}
	}
	if cut >= 0 {
		out := m.pending[:cut]
		m.pending = ""
		return out, true
	}
	if last {
		out := m.pending
		m.pending = ""
		return out, false
	}
	keep := min(len(m.pending), m.maxLen-1)
	for keep > 0 && keep < len(m.pending) && !isRuneStart(m.pending[len(m.pending)-keep]) {
		keep++ // never split a UTF-8 sequence
	}
	out := m.pending[:len(m.pending)-keep]
	m.pending = m.pending[len(m.pending)-keep:]
	return out, false
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
