package api

import (
	"bytes"
	"errors"
)

// ErrNotWholeBody is JoinChoices' error for a body that is not a whole
// OpenAI response of one choice.
var ErrNotWholeBody = errors.New("api: not a whole OpenAI response")

// The joins cut each body where appendBody put its parts: the one choice
// between `{"choices":[` and the last `],"created":`, the fields after it
// up to the last `,"usage":`. Neither can occur inside a JSON string (its
// quotes are escaped there), and only numbers and strings follow them.
var (
	bodyHead    = []byte(`{"choices":[`)
	choicesTail = []byte(`],"created":`)
	usageKey    = []byte(`,"usage":`)
)

// JoinChoices joins whole responses of one choice each (n > 1, each from
// an encoder with its Index and Part) into one: their choices in order,
// with u as the usage (the prompt once, the completions' tokens summed),
// the other fields the first body's. Each choice keeps the bytes its
// encoder wrote.
func JoinChoices(bodies [][]byte, u Usage) ([]byte, error) {
	n := 64
	for _, b := range bodies {
		n += len(b)
	}
	return AppendJoinChoices(make([]byte, 0, n), bodies, u)
}

// AppendJoinChoices appends JoinChoices' answer to dst.
func AppendJoinChoices(dst []byte, bodies [][]byte, u Usage) ([]byte, error) {
	if len(bodies) == 0 {
		return dst, ErrNotWholeBody
	}
	var rest []byte // the first body's fields after its choices, before its usage
	dst = append(dst, bodyHead...)
	for i, b := range bodies {
		choice, after, ok := cutBody(b)
		if !ok {
			return dst, ErrNotWholeBody
		}
		if i == 0 {
			rest = after
		} else {
			dst = append(dst, ',')
		}
		dst = append(dst, choice...)
	}
	dst = append(dst, rest...)
	dst = append(dst, usageKey...)
	dst = appendOpenAIUsage(dst, u)
	return append(dst, '}'), nil
}

// cutBody returns a whole body's choice and the fields after its choices
// array up to its usage (from `],"created":`).
func cutBody(b []byte) (choice, after []byte, ok bool) {
	if !bytes.HasPrefix(b, bodyHead) {
		return nil, nil, false
	}
	end := bytes.LastIndex(b, choicesTail)
	usage := bytes.LastIndex(b, usageKey)
	if end < len(bodyHead) || usage < end {
		return nil, nil, false
	}
	return b[len(bodyHead):end], b[end:usage], true
}
