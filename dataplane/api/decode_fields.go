package api

import (
	"encoding/json"
	"reflect"
	"strings"
)

// decodeSlow decodes body into b with encoding/json (through a struct of
// its own on the heap, where encoding/json takes it, so that the caller's
// b may stay on its stack): the bodies' fallback from the walker.
func decodeSlow[T any](body []byte, b *T) *Error {
	slow := new(T)
	e := decodeJSON(body, slow)
	*b = *slow
	return e
}

// jsonKeys are the member names encoding/json matches to type t's
// fields, embedded structs' included. An unknown key is ignored by both
// decoders, but encoding/json matches keys case-insensitively, so a key
// that is not one of these but folds to one goes to encoding/json.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			keys[strings.ToLower(name)] = true
		}
	}
	walk(t)
	return keys
}

// ignorable reports whether the walker may skip key, one no field
// handled: it matches none of keys, even ignoring case. A key the field
// methods should have handled and did not (keys holds it exactly) is
// not ignorable either: encoding/json reads it.
func ignorable(key []byte, keys map[string]bool) bool {
	var lower [64]byte
	if len(key) > len(lower) {
		return true // no field name is this long
	}
	for i, c := range key {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return !keys[string(lower[:len(key)])]
}

var (
	completionKeys = jsonKeys(reflect.TypeFor[completionBody]())
	chatKeys       = jsonKeys(reflect.TypeFor[chatBody]())
)

// field stores the members of sampling, extraFields and unsupportedFields;
// handled is false for any other key.
func (f *sampling) field(key, v []byte) (handled, ok bool) {
	switch string(key) {
	case "model":
		return true, fastString(v, &f.Model)
	case "max_tokens":
		return true, fastInt64Ptr(v, &f.MaxTokens)
	case "max_completion_tokens":
		return true, fastInt64Ptr(v, &f.MaxCompletion)
	case "temperature":
		return true, fastFloat64Ptr(v, &f.Temperature)
	case "top_p":
		return true, fastFloat64Ptr(v, &f.TopP)
	case "top_k":
		return true, fastInt64Ptr(v, &f.TopK)
	case "seed":
		return true, fastUint64Ptr(v, &f.Seed)
	case "stop":
		return true, fastRaw(v, &f.Stop)
	case "stop_token_ids":
		return true, fastUint32s(v, &f.StopTokenIDs)
	case "ignore_eos":
		return true, fastBool(v, &f.IgnoreEOS)
	case "n":
		return true, fastInt64Ptr(v, &f.N)
	case "stream":
		return true, fastBool(v, &f.Stream)
	case "stream_options":
		return true, fastJSON(v, &f.StreamOptions)
	case "user":
		return true, fastString(v, &f.User)
	case "presence_penalty":
		return true, fastFloat64Ptr(v, &f.PresencePenalty)
	case "frequency_penalty":
		return true, fastFloat64Ptr(v, &f.FrequencyPenalty)
	case "repetition_penalty":
		return true, fastFloat64Ptr(v, &f.RepetitionPenalty)
	case "logit_bias":
		return true, fastJSON(v, &f.LogitBias)
	case "min_tokens":
		return true, fastInt64Ptr(v, &f.MinTokens)
	case "logprobs":
		return true, fastRaw(v, &f.Logprobs)
	case "top_logprobs":
		return true, fastInt64Ptr(v, &f.TopLogprobs)
	case "best_of":
		return true, fastInt64Ptr(v, &f.BestOf)
	}
	if raw := f.unsupportedFields.slot(string(key)); raw != nil {
		*raw = v
		return true, true
	}
	return false, false
}

// completionBody is a POST /v1/completions body.
type completionBody struct {
	sampling
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
}

// decode fills b from body: by the walker when body is plain, else by
// encoding/json, whose errors are the API's.
func (b *completionBody) decode(body []byte) *Error {
	if b.walk(body) {
		return nil
	}
	return decodeSlow(body, b)
}

// walk fills b by the walker; false: body is not plain.
func (b *completionBody) walk(body []byte) bool {
	w := jsonWalker{b: body}
	for w.next() {
		if !b.field(w.key, w.val) {
			return false
		}
	}
	return w.ended() && w.atEnd()
}

func (b *completionBody) field(key, v []byte) bool {
	if handled, ok := b.sampling.field(key, v); handled {
		return ok
	}
	switch string(key) {
	case "prompt":
		return fastRaw(v, &b.Prompt)
	case "echo":
		return fastBool(v, &b.Echo)
	case "suffix":
		if isNull(v) {
			b.Suffix = nil
			return true
		}
		var s string
		if !fastString(v, &s) {
			return false
		}
		b.Suffix = &s
		return true
	}
	return ignorable(key, completionKeys)
}

// chatBody is a POST /v1/chat/completions body.
type chatBody struct {
	sampling
	Messages            json.RawMessage            `json:"messages"`
	Tools               json.RawMessage            `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	ResponseFormat      json.RawMessage            `json:"response_format"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	// pre is messages normalized while the walker read them, so a
	// long conversation is scanned once.
	pre preNormalized
}

// preNormalized are a chat's messages as normalizeMessages gives them
// (done: the walker normalized them), its error kept for when DecodeChat
// checks the messages, after every field before them.
type preNormalized struct {
	done bool
	msgs json.RawMessage
	err  error
	sink imageSink
}

// normalizeAt normalizes the messages at w's place, leaving w after
// them; false leaves w and b as they were, for the messages to be read
// as any other field and normalized later.
func (b *chatBody) normalizeAt(w *jsonWalker) bool {
	list := jsonWalker{b: w.b, i: w.i}
	sink := new(imageSink) // on the heap, where the images go; b stays where its caller put it
	msgs, ok, err := normalizePlainAt(&list, sink)
	if !ok {
		return false
	}
	b.Messages = w.b[w.i:list.i]
	b.pre = preNormalized{done: true, msgs: msgs, err: err, sink: *sink}
	w.i = list.i
	return true
}

// messages normalizes the chat's messages into sink, or gives what the
// walker normalized (its images put in sink).
func (b *chatBody) messages(sink *imageSink) (json.RawMessage, error) {
	if !b.pre.done {
		return normalizeMessages(b.Messages, sink)
	}
	sink.images = append(sink.images, b.pre.sink.images...)
	return b.pre.msgs, b.pre.err
}

// decode fills b from body as completionBody's does.
func (b *chatBody) decode(body []byte) *Error {
	if b.walk(body) {
		return nil
	}
	return decodeSlow(body, b)
}

// walk fills b by the walker, normalizing the messages as it reads
// them; false: body is not plain.
func (b *chatBody) walk(body []byte) bool {
	w := jsonWalker{b: body}
	for w.nextKey() {
		if string(w.key) == "messages" && !b.pre.done && b.normalizeAt(&w) {
			continue
		}
		if !w.takeValue() || !b.field(w.key, w.val) {
			return false
		}
	}
	return w.ended() && w.atEnd()
}

func (b *chatBody) field(key, v []byte) bool {
	if handled, ok := b.sampling.field(key, v); handled {
		return ok
	}
	switch string(key) {
	case "messages":
		return !b.pre.done && fastRaw(v, &b.Messages) // given twice: encoding/json's
	case "tools":
		return fastRaw(v, &b.Tools)
	case "tool_choice":
		return fastRaw(v, &b.ToolChoice)
	case "response_format":
		return fastRaw(v, &b.ResponseFormat)
	case "chat_template_kwargs":
		return fastJSON(v, &b.ChatTemplateKwargs)
	case "add_generation_prompt":
		return fastBoolPtr(v, &b.AddGenerationPrompt)
	}
	return ignorable(key, chatKeys)
}
