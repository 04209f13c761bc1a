package dataplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// samplingFields are the OpenAI request fields shared by both endpoints.
type samplingFields struct {
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
}

// decodeJSON parses a request body strictly enough to name the bad field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "request body is empty; expected a JSON object")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asType(err, &te); ok {
			return badRequest(te.Field, fmt.Sprintf("field %q must be %s", te.Field, te.Type))
		}
		return badRequest("", "malformed JSON: "+err.Error())
	}
	if _, err := d.Token(); err != io.EOF {
		return badRequest("", "malformed JSON: data after the object")
	}
	return nil
}

func asType(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

// toGen validates sampling fields into a genRequest (tokens set later).
func (g *Gateway) toGen(f *samplingFields, reqID string, defaultMax int64) (*genRequest, *apiError) {
	if f.Model == "" {
		return nil, badRequest("model", "field \"model\" is required")
	}
	if !g.serves(f.Model) {
		if g.connecting() {
			return nil, &apiError{status: 503, message: "engines are still connecting; model " + f.Model + " is not known yet", retryAfter: 1}
		}
		return nil, notFound(fmt.Sprintf("model %q is not served here (see GET /v1/models)", f.Model))
	}
	if f.N != nil && *f.N != 1 {
		return nil, badRequest("n", "only n=1 is supported")
	}
	req := &genRequest{reqID: reqID, model: f.Model, temperature: 1, topP: 1, seed: f.Seed, ignoreEOS: f.IgnoreEOS,
		stopIDs: f.StopTokenIDs, session: f.User}
	maxTokens := defaultMax
	switch {
	case f.MaxCompletion != nil:
		maxTokens = *f.MaxCompletion
	case f.MaxTokens != nil:
		maxTokens = *f.MaxTokens
	}
	if maxTokens < 1 || maxTokens > 1<<24 {
		return nil, badRequest("max_tokens", "max_tokens must be between 1 and 16777216")
	}
	req.maxTokens = uint32(maxTokens)
	if f.Temperature != nil {
		if *f.Temperature < 0 || *f.Temperature > 2 {
			return nil, badRequest("temperature", "temperature must be between 0 and 2")
		}
		req.temperature = float32(*f.Temperature)
	}
	if f.TopP != nil {
		if *f.TopP <= 0 || *f.TopP > 1 {
			return nil, badRequest("top_p", "top_p must be in (0, 1]")
		}
		req.topP = float32(*f.TopP)
	}
	if f.TopK != nil {
		req.topK = int32(max(min(*f.TopK, 1<<20), -1))
	}
	stops, err := parseStop(f.Stop)
	if err != nil {
		return nil, badRequest("stop", err.Error())
	}
	req.stopStrings = stops
	return req, nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) > 16 {
		return nil, fmt.Errorf("stop must be a string or a list of at most 16 strings")
	}
	return many, nil
}

// connecting reports whether some engine has never completed a handshake,
// so the set of served models may still grow.
func (g *Gateway) connecting() bool {
	for _, e := range g.Pool.Engines() {
		if e.Info().ID == "" {
			return true
		}
	}
	return false
}

// serves reports whether a wire engine or an HTTP engine serves model.
func (g *Gateway) serves(model string) bool {
	return g.servesWire(model) || (g.Passthrough != nil && g.Passthrough.Serves(model))
}

func (g *Gateway) servesWire(model string) bool {
	for _, e := range g.Pool.Engines() {
		if e.Serves(model) {
			return true
		}
	}
	return false
}

// promptLimit refuses prompts the model cannot take.
func (g *Gateway) promptLimit(n int) *apiError {
	if max := g.Tok.Config.ModelMaxLength; max > 0 && n >= max {
		return badRequest("prompt", fmt.Sprintf("prompt is %d tokens; the model takes at most %d", n, max))
	}
	if n == 0 {
		return badRequest("prompt", "prompt is empty")
	}
	return nil
}

func (g *Gateway) completions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	var body struct {
		samplingFields
		Prompt json.RawMessage `json:"prompt"`
	}
	if e := decodeJSON(r.Body, &body); e != nil {
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	return g.serveOpenAI(w, r, &body.samplingFields, reqID, false, func(req *genRequest) (e *apiError) {
		req.tokens, e = g.promptTokens(body.Prompt)
		return e
	})
}

// serveOpenAI validates the sampling fields, lets prepare fill in the
// prompt (and constraints), checks its length and runs the request.
func (g *Gateway) serveOpenAI(w *httpx.ResponseWriter, r *httpx.Request, f *samplingFields, reqID string, chat bool,
	prepare func(*genRequest) *apiError) int {
	defaultMax, prefix := int64(16), "cmpl-"
	if chat {
		defaultMax, prefix = 4096, "chatcmpl-"
	}
	req, e := g.toGen(f, reqID, defaultMax)
	if e == nil {
		e = prepare(req)
	}
	if e == nil {
		e = g.promptLimit(len(req.tokens))
	}
	if e != nil {
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	if status, ok := g.passthrough(w, r, req, flavorOpenAI); ok {
		return status
	}
	out := &openaiOut{w: w, id: prefix + reqID, model: req.model, created: time.Now().Unix(), chat: chat,
		stream: f.Stream, includeUsage: f.StreamOptions != nil && f.StreamOptions.IncludeUsage}
	return g.run(w, req, out)
}

// promptTokens reads a completions prompt: a string, a one-element list of
// strings, or token ids.
func (g *Gateway) promptTokens(raw json.RawMessage) ([]uint32, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "field \"prompt\" is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return g.Tok.Encode(nil, s, true), nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		if len(ss) != 1 {
			return nil, badRequest("prompt", "a list of prompts must have exactly one element (batching is not supported)")
		}
		return g.Tok.Encode(nil, ss[0], true), nil
	}
	var ids []uint32
	if json.Unmarshal(raw, &ids) == nil {
		for _, id := range ids {
			if int(id) >= g.Tok.VocabSize() {
				return nil, badRequest("prompt", fmt.Sprintf("token id %d is outside the vocabulary", id))
			}
		}
		return ids, nil
	}
	var nested [][]uint32
	if json.Unmarshal(raw, &nested) == nil && len(nested) == 1 {
		return nested[0], nil
	}
	return nil, badRequest("prompt", "prompt must be a string, a list of one string, or a list of token ids")
}

func (g *Gateway) chatCompletions(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	var body struct {
		samplingFields
		Messages            json.RawMessage            `json:"messages"`
		Tools               json.RawMessage            `json:"tools"`
		ToolChoice          json.RawMessage            `json:"tool_choice"`
		ResponseFormat      json.RawMessage            `json:"response_format"`
		ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
		AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	}
	if e := decodeJSON(r.Body, &body); e != nil {
		writeError(w, flavorOpenAI, e)
		return e.status
	}
	return g.serveOpenAI(w, r, &body.samplingFields, reqID, true, func(req *genRequest) (e *apiError) {
		if req.guided, e = guidedOf(body.ResponseFormat, body.ToolChoice); e != nil {
			return e
		}
		req.tokens, e = g.chatTokens(body.Messages, body.Tools, body.ChatTemplateKwargs, body.AddGenerationPrompt)
		return e
	})
}

// guidedOf builds the structured-output constraint the engine must honour:
// a response_format other than text, or a tool_choice that forces a call
// ("required" or a named function). "auto" and "none" constrain nothing:
// tools reach the model through the chat template.
func guidedOf(responseFormat, toolChoice json.RawMessage) ([]byte, *apiError) {
	g := map[string]json.RawMessage{}
	if len(responseFormat) > 0 && string(responseFormat) != "null" {
		var rf struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(responseFormat, &rf); err != nil {
			return nil, badRequest("response_format", "response_format must be an object with a type")
		}
		switch rf.Type {
		case "text":
		case "json_object", "json_schema":
			g["response_format"] = responseFormat
		default:
			return nil, badRequest("response_format", fmt.Sprintf("response_format type %q is not text, json_object or json_schema", rf.Type))
		}
	}
	if len(toolChoice) > 0 && string(toolChoice) != "null" {
		var s string
		if json.Unmarshal(toolChoice, &s) == nil {
			switch s {
			case "auto", "none":
			case "required":
				g["tool_choice"] = toolChoice
			default:
				return nil, badRequest("tool_choice", fmt.Sprintf("tool_choice %q is not auto, none or required", s))
			}
		} else {
			g["tool_choice"] = toolChoice // a named function
		}
	}
	if len(g) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(g)
	return b, nil
}

// chatTokens renders and tokenizes a conversation.
func (g *Gateway) chatTokens(messages, tools json.RawMessage, kwargs map[string]json.RawMessage, addGen *bool) ([]uint32, *apiError) {
	msgs, err := normalizeMessages(messages)
	if err != nil {
		return nil, badRequest("messages", err.Error())
	}
	in := &tokenize.ChatInput{Messages: msgs, Tools: tools, AddGenerationPrompt: addGen == nil || *addGen, Extra: kwargs}
	ids, _, rerr := g.Tok.EncodeChat(nil, in)
	if rerr != nil {
		return nil, badRequest("messages", rerr.Error())
	}
	return ids, nil
}

// normalizeMessages checks the messages and flattens content given as a
// list of parts into one string (text parts joined by newlines, as vLLM
// does for string-content templates), keeping every other key in order.
func normalizeMessages(raw json.RawMessage) (json.RawMessage, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("messages must be a non-empty list of message objects")
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := normalizeMessage(&out, m, i); err != nil {
			return nil, err
		}
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

func normalizeMessage(out *bytes.Buffer, m json.RawMessage, i int) error {
	d := json.NewDecoder(bytes.NewReader(m))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("messages[%d] must be an object", i)
	}
	out.WriteByte('{')
	role := ""
	for first := true; d.More(); first = false {
		k, _ := d.Token()
		key, _ := k.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("messages[%d].%s: %v", i, key, err)
		}
		switch key {
		case "role":
			if json.Unmarshal(v, &role) != nil {
				return fmt.Errorf("messages[%d].role must be a string", i)
			}
		case "content":
			flat, err := flattenContent(v)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %v", i, err)
			}
			v = flat
		}
		if !first {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	switch role {
	case "system", "user", "assistant", "tool", "developer":
	default:
		return fmt.Errorf("messages[%d].role %q is not system, user, assistant or tool", i, role)
	}
	out.WriteByte('}')
	return nil
}

func flattenContent(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 || v[0] != '[' {
		return v, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(v, &parts); err != nil {
		return nil, fmt.Errorf("content parts must be objects with type and text")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return nil, fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return json.Marshal(strings.Join(texts, "\n"))
}

func (g *Gateway) models(w *httpx.ResponseWriter, _ *httpx.Request, _ string) int {
	seen := map[string]bool{}
	var data []map[string]any
	add := func(id string, extra map[string]any) {
		if !seen[id] {
			seen[id] = true
			m := map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "kvgate"}
			for k, v := range extra {
				m[k] = v
			}
			data = append(data, m)
		}
	}
	for _, e := range g.Pool.Engines() {
		info := e.Info()
		for _, m := range info.Models {
			add(m, nil)
		}
		for _, l := range info.LoRAs {
			if len(info.Models) > 0 {
				add(l.Name, map[string]any{"parent": info.Models[0]})
			}
		}
	}
	if g.Passthrough != nil {
		for _, e := range g.Passthrough.Engines {
			for _, m := range e.Models() {
				add(m, nil)
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	return g.simple(w, nil, 200, string(b))
}

// openaiOut encodes OpenAI completions and chat completions.
type openaiOut struct {
	w            *httpx.ResponseWriter
	id, model    string
	created      int64
	chat, stream bool
	includeUsage bool
	started      bool
	text         strings.Builder
}

func (o *openaiOut) object() string {
	switch {
	case o.chat && o.stream:
		return "chat.completion.chunk"
	case o.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (o *openaiOut) start(engineID string) error {
	o.started = true
	if err := beginResponse(o.w, engineID, o.stream); err != nil || !o.stream {
		return err
	}
	if o.chat {
		return o.event(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}, nil)
	}
	return nil
}

func (o *openaiOut) choice(text string, finish any) map[string]any {
	if o.chat {
		delta := map[string]any{}
		if text != "" {
			delta["content"] = text
		}
		return map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
	}
	return map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish}
}

func (o *openaiOut) event(choice map[string]any, u *usage) error {
	m := map[string]any{"id": o.id, "object": o.object(), "created": o.created, "model": o.model}
	if choice != nil {
		m["choices"] = []any{choice}
	} else {
		m["choices"] = []any{}
	}
	if u != nil {
		m["usage"] = usageJSON(*u)
	}
	b, _ := json.Marshal(m)
	return o.w.Chunk(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (o *openaiOut) delta(text string) error {
	if !o.stream {
		o.text.WriteString(text)
		return nil
	}
	return o.event(o.choice(text, nil), nil)
}

func usageJSON(u usage) map[string]any {
	return map[string]any{"prompt_tokens": u.prompt, "completion_tokens": u.completion,
		"total_tokens": u.prompt + u.completion, "prompt_tokens_details": map[string]any{"cached_tokens": u.cached}}
}

func (o *openaiOut) finish(reason string, u usage) error {
	if !o.stream {
		var choice map[string]any
		if o.chat {
			choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": o.text.String()},
				"logprobs": nil, "finish_reason": reason}
		} else {
			choice = map[string]any{"index": 0, "text": o.text.String(), "logprobs": nil, "finish_reason": reason}
		}
		b, _ := json.Marshal(map[string]any{"id": o.id, "object": o.object(), "created": o.created, "model": o.model,
			"choices": []any{choice}, "usage": usageJSON(u)})
		o.w.Header().Set("Content-Type", "application/json")
		o.w.WriteHeader(200)
		_, _ = o.w.Write(b)
		return o.w.Finish()
	}
	if err := o.event(o.choice("", reason), nil); err != nil {
		return err
	}
	if o.includeUsage {
		if err := o.event(nil, &u); err != nil {
			return err
		}
	}
	if err := o.w.Chunk([]byte("data: [DONE]\n\n")); err != nil {
		return err
	}
	return o.w.Finish()
}

func (o *openaiOut) fail(e *apiError) {
	if !o.started || !o.stream {
		writeError(o.w, flavorOpenAI, e)
		return
	}
	b := e.body(flavorOpenAI)
	_ = o.w.Chunk(append(append([]byte("data: "), b...), '\n', '\n'))
	_ = o.w.Chunk([]byte("data: [DONE]\n\n"))
	_ = o.w.Finish()
}
