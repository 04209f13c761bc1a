package tokenize

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// errSlowJSON sends jsonValue to encoding/json's decoder, which words the
// error: the input is not valid JSON.
var errSlowJSON = errors.New("tokenize: JSON for the decoder")

// fastValue converts JSON to a template value in one pass over raw,
// giving exactly what decodeValue gives (key order kept, numbers as
// json.Number, duplicate keys set in turn), an order of magnitude faster
// than encoding/json's token stream.
type fastValue struct {
	raw []byte
	at  int
}

func (p *fastValue) skipSpace() {
	for p.at < len(p.raw) && isJSONSpace(p.raw[p.at]) {
		p.at++
	}
}

func (p *fastValue) value(depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), errSlowJSON
	}
	p.skipSpace()
	if p.at >= len(p.raw) {
		return jinja.Undefined(), errSlowJSON
	}
	switch c := p.raw[p.at]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return jinja.NewString(s), err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    jinja.Value
	}{{"true", jinja.NewBool(true)}, {"false", jinja.NewBool(false)}, {"null", jinja.None()}} {
		if len(p.raw)-p.at >= len(lit.text) && string(p.raw[p.at:p.at+len(lit.text)]) == lit.text {
			p.at += len(lit.text)
			return lit.v, nil
		}
	}
	return jinja.Undefined(), errSlowJSON
}

func (p *fastValue) object(depth int) (jinja.Value, error) {
	obj := jinja.NewDict()
	d := obj.AsDict()
	p.at++ // '{'
	for first := true; ; first = false {
		p.skipSpace()
		if p.at < len(p.raw) && p.raw[p.at] == '}' && first {
			p.at++
			return obj, nil
		}
		if p.at >= len(p.raw) || p.raw[p.at] != '"' {
			return obj, errSlowJSON
		}
		k, err := p.str()
		if err != nil {
			return obj, err
		}
		p.skipSpace()
		if p.at >= len(p.raw) || p.raw[p.at] != ':' {
			return obj, errSlowJSON
		}
		p.at++
		v, err := p.value(depth + 1)
		if err != nil {
			return obj, err
		}
		d.Set(k, v)
		p.skipSpace()
		if p.at >= len(p.raw) {
			return obj, errSlowJSON
		}
		switch p.raw[p.at] {
		case ',':
			p.at++
		case '}':
			p.at++
			return obj, nil
		default:
			return obj, errSlowJSON
		}
	}
}

func (p *fastValue) array(depth int) (jinja.Value, error) {
	var items []jinja.Value
	p.at++ // '['
	for first := true; ; first = false {
		p.skipSpace()
		if p.at < len(p.raw) && p.raw[p.at] == ']' && first {
			p.at++
			return jinja.NewList(items), nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		items = append(items, v)
		p.skipSpace()
		if p.at >= len(p.raw) {
			return v, errSlowJSON
		}
		switch p.raw[p.at] {
		case ',':
			p.at++
		case ']':
			p.at++
			return jinja.NewList(items), nil
		default:
			return v, errSlowJSON
		}
	}
}

// str reads a string. One without escapes, of valid UTF-8, is its bytes;
// encoding/json unquotes the others, so they mean what they mean to the
// decoder (surrogates, invalid UTF-8).
func (p *fastValue) str() (string, error) {
	start, plain := p.at+1, true
	for i := start; i < len(p.raw); i++ {
		switch c := p.raw[i]; {
		case c == '"':
			s := p.raw[start:i]
			if plain && utf8.Valid(s) {
				p.at = i + 1
				return string(s), nil
			}
			out, ok := unescape(s)
			if !ok {
				if err := json.Unmarshal(p.raw[p.at:i+1], &out); err != nil {
					return "", errSlowJSON
				}
			}
			p.at = i + 1
			return out, nil
		case c == '\\':
			plain = false
			i++ // the escaped byte
		case c < 0x20:
			return "", errSlowJSON
		}
	}
	return "", errSlowJSON
}

// unescape decodes a string body's escapes (unescapeJSON, chat_markers.go);
// invalid UTF-8 is left to encoding/json (ok false), which replaces it.
func unescape(s []byte) (string, bool) {
	out, ok := unescapeJSON(make([]byte, 0, len(s)), s)
	if !ok || !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// number reads a number by JSON's grammar.
func (p *fastValue) number() (jinja.Value, error) {
	start, i := p.at, p.at
	digits := func() bool {
		n := i
		for i < len(p.raw) && p.raw[i] >= '0' && p.raw[i] <= '9' {
			i++
		}
		return i > n
	}
	if p.raw[i] == '-' {
		i++
	}
	if i < len(p.raw) && p.raw[i] == '0' {
		i++
	} else if !digits() {
		return jinja.Undefined(), errSlowJSON
	}
	if i < len(p.raw) && p.raw[i] == '.' {
		i++
		if !digits() {
			return jinja.Undefined(), errSlowJSON
		}
	}
	if i < len(p.raw) && (p.raw[i] == 'e' || p.raw[i] == 'E') {
		i++
		if i < len(p.raw) && (p.raw[i] == '+' || p.raw[i] == '-') {
			i++
		}
		if !digits() {
			return jinja.Undefined(), errSlowJSON
		}
	}
	p.at = i
	return jinja.FromGoValue(json.Number(p.raw[start:i])), nil
}

// fastJSONValue converts a whole JSON text, or answers errSlowJSON.
func fastJSONValue(raw []byte) (jinja.Value, error) {
	p := fastValue{raw: raw}
	v, err := p.value(0)
	if err != nil {
		return v, err
	}
	if p.skipSpace(); p.at != len(raw) {
		return jinja.Undefined(), errSlowJSON
	}
	return v, nil
}
