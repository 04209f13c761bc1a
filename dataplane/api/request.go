package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Kind is the API a Request came from.
type Kind uint8

const (
	// Completion is OpenAI's POST /v1/completions.
	Completion Kind = iota
	// Chat is OpenAI's POST /v1/chat/completions.
	Chat
	// Messages is Anthropic's POST /v1/messages.
	Messages
	// Responses is OpenAI's POST /v1/responses.
	Responses
)

// String names the kind as its endpoint does.
func (k Kind) String() string {
	switch k {
	case Chat:
		return "chat.completions"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	}
	return "completions"
}

// Flavor is the error and stream shape of the kind's API.
func (k Kind) Flavor() Flavor {
	if k == Messages {
		return Anthropic
	}
	return OpenAI
}

// Request is a generation request as decoded and range-checked from any of
// the APIs, before tokenization.
type Request struct {
	Kind  Kind
	Model string
	// MaxTokens is the API's limit, or its default when the client gave none.
	MaxTokens uint32
	// MaxTokensGiven says the client set MaxTokens: a limit the context
	// cannot hold is then an error, where a default is only cut to fit.
	MaxTokensGiven bool
	Temperature    float32
	TopP           float32
	// TopK is -1 or 0 for no limit, clamped to 2^20.
	TopK         int32
	Seed         *uint64
	IgnoreEOS    bool
	StopTokenIDs []uint32
	Stop         []string
	// User is the client's user id (OpenAI user, Anthropic metadata.user_id),
	// the session key of the session policy.
	User         string
	Stream       bool
	IncludeUsage bool
	// Guided is the structured-output constraint engines must honour
	// (response_format, a forced tool_choice), nil when unconstrained.
	Guided []byte
	// NoToolCalls is tool_choice none: the output is text, whatever it holds.
	NoToolCalls bool
	// Extras are the sampling and output options an engine must announce.
	Extras Extras
	// Echo (completions) returns the prompt before the output.
	Echo bool
	// N is the number of choices (OpenAI's n) when over 1, each generated
	// on its own; 0 is one.
	N int
	// Prompt is a completion's prompt.
	Prompt Prompt
	// Conversation is a chat's or a message's conversation.
	Conversation Conversation
}

// Prompt is a completions prompt: text, or token ids the client tokenized.
type Prompt struct {
	Text string
	IDs  []uint32
	// IsIDs is true when the client sent token ids.
	IsIDs bool
}

// Conversation is what a chat template renders: the messages with content
// flattened to strings (a list of text and image parts where there are
// images), the tools, and the template's extra variables.
type Conversation struct {
	Messages            json.RawMessage
	Tools               json.RawMessage
	Kwargs              map[string]json.RawMessage
	AddGenerationPrompt bool
	// Images are the conversation's images in the order their
	// {"type": "image"} parts appear in Messages (media.go).
	Images []Image
}

// HasTools reports whether the conversation offers the model tools.
func (c *Conversation) HasTools() bool {
	return len(c.Tools) > 0 && string(c.Tools) != "null" && string(c.Tools) != "[]"
}

// Largest max_tokens and n accepted.
const (
	maxMaxTokens = 1 << 24
	maxChoices   = 16
)

// sampling are the request fields shared by OpenAI's two endpoints (and
// filled from Anthropic's).
type sampling struct {
	Model         string          `json:"model"`
	MaxTokens     *int64          `json:"max_tokens"`
	MaxCompletion *int64          `json:"max_completion_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int64          `json:"top_k"`
	Seed          *uint64         `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	StopTokenIDs  []uint32        `json:"stop_token_ids"`
	IgnoreEOS     bool            `json:"ignore_eos"`
	N             *int64          `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
	extraFields
	unsupportedFields
}

// decodeJSON parses a request body strictly enough to name the bad field.
func decodeJSON(body []byte, v any) *Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", "request body is empty; expected a JSON object")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// encoding/json names a field of an embedded struct by the
			// struct's Go name too ("sampling.model"); clients know "model".
			field := te.Field
			for _, embedded := range []string{"sampling.", "extraFields.", "unsupportedFields."} {
				field = strings.TrimPrefix(field, embedded)
			}
			return BadRequest(field, fmt.Sprintf("field %q must be %s", field, jsonType(te.Type)))
		}
		return BadRequest("", "malformed JSON: "+err.Error())
	}
	if _, err := d.Token(); err != io.EOF {
		return BadRequest("", "malformed JSON: data after the object")
	}
	return nil
}

// ModelCheck says whether a model is served here, with the error to give
// when it is not. Decoders call it as soon as they know the model, before
// checking any other field, so an unknown model is answered as such
// whatever else is wrong with the request. nil accepts every model.
type ModelCheck func(model string) *Error

// request range-checks the sampling fields into a Request of kind k;
// defaultMax applies when the client set no token limit.
func (f *sampling) request(k Kind, defaultMax int64, check ModelCheck) (*Request, *Error) {
	if f.Model == "" {
		return nil, BadRequest("model", "field \"model\" is required")
	}
	if check != nil {
		if e := check(f.Model); e != nil {
			return nil, e
		}
	}
	if e := f.unsupportedFields.refuse(); e != nil {
		return nil, e
	}
	n := 1
	if f.N != nil {
		if *f.N < 1 || *f.N > maxChoices {
			return nil, BadRequest("n", fmt.Sprintf("n must be between 1 and %d", maxChoices))
		}
		n = int(*f.N)
	}
	r := &Request{Kind: k, Model: f.Model, Temperature: 1, TopP: 1, Seed: f.Seed, IgnoreEOS: f.IgnoreEOS,
		StopTokenIDs: f.StopTokenIDs, User: f.User, Stream: f.Stream,
		IncludeUsage: f.StreamOptions != nil && f.StreamOptions.IncludeUsage}
	maxTokens := defaultMax
	switch {
	case f.MaxCompletion != nil:
		maxTokens, r.MaxTokensGiven = *f.MaxCompletion, true
	case f.MaxTokens != nil:
		maxTokens, r.MaxTokensGiven = *f.MaxTokens, true
	}
	if maxTokens < 1 || maxTokens > maxMaxTokens {
		return nil, BadRequest("max_tokens", "max_tokens must be between 1 and 16777216")
	}
	r.MaxTokens = uint32(maxTokens)
	if n > 1 {
		r.N = n
	}
	var e *Error
	if r.Extras, e = f.extras(k, r.MaxTokens, n); e != nil {
		return nil, e
	}
	if f.Temperature != nil {
		if *f.Temperature < 0 || *f.Temperature > 2 {
			return nil, BadRequest("temperature", "temperature must be between 0 and 2")
		}
		r.Temperature = float32(*f.Temperature)
	}
	if f.TopP != nil {
		if *f.TopP <= 0 || *f.TopP > 1 {
			return nil, BadRequest("top_p", "top_p must be in (0, 1]")
		}
		r.TopP = float32(*f.TopP)
	}
	if f.TopK != nil {
		r.TopK = int32(max(min(*f.TopK, 1<<20), -1))
	}
	stops, err := parseStop(f.Stop)
	if err != nil {
		return nil, BadRequest("stop", err.Error())
	}
	r.Stop = stops
	return r, nil
}

// maxStops is the most stop strings a request may give (OpenAI allows 4;
// vLLM and Anthropic more).
const maxStops = 16

// parseStop reads OpenAI's stop: a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) > maxStops {
		return nil, fmt.Errorf("stop must be a string or a list of at most %d strings", maxStops)
	}
	return many, nil
}

// jsonType names what a Go type decodes from in JSON terms: clients sent
// JSON, and "uint32" or "api.sampling" would mean nothing to them.
func jsonType(t reflect.Type) string {
	if t == reflect.TypeFor[json.RawMessage]() {
		return "valid JSON"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(jsonType(t.Elem()), "a "), "an ") + "s"
	}
	return "an object"
}

// checkArrayOfObjects refuses a field that is present but not a list of
// JSON objects (tools, in both APIs).
func checkArrayOfObjects(field string, raw json.RawMessage) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return BadRequest(field, fmt.Sprintf("field %q must be an array of objects", field))
	}
	for i, it := range items {
		if len(it) == 0 || it[0] != '{' {
			return BadRequest(field, fmt.Sprintf("%s[%d] must be an object", field, i))
		}
	}
	return nil
}
