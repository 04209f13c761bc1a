package gateway

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// Model is one model the gateway serves: the tokenizer and chat template
// its prompts are rendered and tokenized with, the parsers of its output,
// its context limit and the other names requests may call it by. A
// request's model (an alias resolved) picks it; the engines that serve the
// model are the only candidates for the request (route.Router).
type Model struct {
	// Name is the model's name as engines announce it and requests carry it.
	Name string
	// Aliases are other names requests may use: a request for an alias is
	// routed, sent to the engine and answered as Name (vLLM answers with
	// its first served model name too).
	Aliases []string
	// Tok is the model's tokenizer, with its chat template.
	Tok *tokenize.Tokenizer
	// TokName is what logs and /v1/models call the tokenizer (its directory).
	TokName string
	// MaxModelLen is the context length in tokens, prompt plus output
	// (0: the smallest its engines announce, else the tokenizer's
	// model_max_length).
	MaxModelLen int
	// ToolParser and ReasoningParser name the syntax of the model's tool
	// calls and reasoning as Gateway's fields of those names do.
	ToolParser, ReasoningParser string
	choice                      parserChoice
}

// Model errors.
var (
	// ErrModelConfig: a set of models that cannot be served together
	// (a name or alias given twice, an empty name).
	ErrModelConfig = errors.New("gateway: invalid model configuration")
	// ErrChatTemplate: a model's chat template fails on a plain
	// conversation, so every chat request would fail.
	ErrChatTemplate = errors.New("gateway: chat template cannot be rendered")
)

// Check refuses a model that could not serve requests: no tokenizer, an
// unknown parser name, or a chat template that fails to render a plain
// conversation (one user message, with and without the generation prompt).
func (m *Model) Check() error {
	if m.Name == "" {
		return fmt.Errorf("%w: a model without a name", ErrModelConfig)
	}
	if m.Tok == nil {
		return fmt.Errorf("%w: model %q has no tokenizer", ErrModelConfig, m.Name)
	}
	if err := CheckParsers(m.ToolParser, m.ReasoningParser); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	if m.MaxModelLen < 0 {
		return fmt.Errorf("%w: model %q: max-model-len %d is negative", ErrModelConfig, m.Name, m.MaxModelLen)
	}
	tmpl := m.Tok.Chat()
	if tmpl == nil {
		return nil // completions only: chats are refused, naming the reason
	}
	probe := json.RawMessage(`[{"role":"user","content":"Hello"}]`)
	for _, gen := range []bool{true, false} {
		if _, err := tmpl.Render(&tokenize.ChatInput{Messages: probe, AddGenerationPrompt: gen}); err != nil {
			return fmt.Errorf("%w: model %q: %v", ErrChatTemplate, m.Name, err)
		}
	}
	return nil
}

// CheckModels checks each model and that no name or alias is given twice.
func CheckModels(models []*Model) error {
	seen := map[string]string{}
	for _, m := range models {
		if err := m.Check(); err != nil {
			return err
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			if n == "" {
				return fmt.Errorf("%w: model %q has an empty alias", ErrModelConfig, m.Name)
			}
			if other, ok := seen[n]; ok {
				return fmt.Errorf("%w: %q names both model %q and model %q", ErrModelConfig, n, other, m.Name)
			}
			seen[n] = m.Name
		}
	}
	return nil
}

// catalog is the gateway's models by every name they go by: built at the
// first request from Models (or, without them, from the one-model fields:
// the shorthand that serves every announced name), replaced whole by
// SetModels, never changed in place. A request keeps the *Model it
// resolved for its whole life.
type catalog struct {
	byName   map[string]*Model // names and aliases
	list     []*Model          // in configuration order
	fallback *Model            // the one-model shorthand; nil with Models
}

func newCatalog(g *Gateway, models []*Model) *catalog {
	c := &catalog{byName: map[string]*Model{}, list: models}
	if len(models) == 0 {
		c.fallback = &Model{Tok: g.Tok, MaxModelLen: g.MaxModelLen, ToolParser: g.ToolParser, ReasoningParser: g.ReasoningParser}
		return c
	}
	for _, m := range models {
		c.byName[m.Name] = m
		for _, a := range m.Aliases {
			c.byName[a] = m
		}
	}
	return c
}

func (g *Gateway) catalog() *catalog {
	if c := g.cat.Load(); c != nil {
		return c
	}
	g.cat.CompareAndSwap(nil, newCatalog(g, g.Models))
	return g.cat.Load()
}

// SetModels replaces the served models while serving (a config reload
// that loaded them with LoadModels): requests decoded after it returns
// use models; those in flight finish with the model they started with.
// Safe for concurrent use; models must not change after the call.
func (g *Gateway) SetModels(models []*Model) { g.cat.Store(newCatalog(g, models)) }

// resolve maps a requested model name onto the name engines know it by
// (an alias becomes its model's name) and the served model whose
// tokenizer and parsers apply; m is nil when Models are configured and
// none of them is name, its alias, or the base model of an engine's LoRA
// adapter called name.
func (g *Gateway) resolve(name string) (canonical string, m *Model) {
	c := g.catalog()
	if c.fallback != nil {
		return name, c.fallback
	}
	if m := c.byName[name]; m != nil {
		return m.Name, m
	}
	if g.Pool != nil {
		for _, e := range g.Pool.Engines() {
			if base, lora, ok := e.Resolve(name); ok && lora != 0 {
				if m := c.byName[base]; m != nil {
					return name, m // an adapter: the base model's tokenizer
				}
			}
		}
	}
	return name, nil
}

// modelFor is the model of a request for name (an alias resolved): 404
// when no engine serves it (503 while engines are still connecting), and
// a clear refusal when engines serve it but no tokenizer is configured
// for it.
func (g *Gateway) modelFor(name string) (string, *Model, *api.Error) {
	canonical, m := g.resolve(name)
	if !g.serves(canonical) {
		if g.connecting() {
			return "", nil, &api.Error{Status: 503, Message: "engines are still connecting; model " + name + " is not known yet", RetryAfter: 1}
		}
		return "", nil, api.NotFound(fmt.Sprintf("model %q is not served here (see GET /v1/models)", name))
	}
	if m == nil {
		if _, warned := g.untokenized.LoadOrStore(canonical, true); !warned && g.Log != nil {
			g.Log.Warn("engines serve a model no --model names: its requests are refused", "model", canonical)
		}
		return "", nil, &api.Error{Status: 500, Type: "server_error", Message: fmt.Sprintf(
			"model %q is served by engines but kvgate has no tokenizer for it (start kvgate with --model %s=DIR)", name, name)}
	}
	return canonical, m, nil
}
