package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// Spec is what the bridge's flags say the server is: where, which model,
// and the tokenizer routers tokenize with.
type Spec struct {
	URL       string
	Model     string
	Tokenizer *tokenize.Tokenizer
}

// Server is a llama.cpp server that passed the connect checks: what its
// /props and /v1/models said.
type Server struct {
	Props  *Props
	Models *Models
}

// Slots is the number of slots (llama-server --parallel).
func (s *Server) Slots() int { return s.Props.TotalSlots }

// SlotContext is one slot's context in tokens.
func (s *Server) SlotContext() int { return s.Props.Settings.NCtx }

// Kind is server software the bridge tells apart.
type Kind string

// Kinds of server.
const (
	KindUnknown  Kind = ""
	KindLlamaCpp Kind = "llamacpp"
	KindVLLM     Kind = "vllm"
)

// Identify asks the server at url what it is: llama.cpp's answers /props
// with its build and /v1/models with owned_by "llamacpp"; vLLM's owned_by
// is "vllm" (SGLang's "sglang" counts as vLLM's API). It returns what said
// so, for a log line, and ErrUnreachable when nothing answered.
func Identify(ctx context.Context, c *http.Client, url string) (Kind, string, error) {
	var errs []error
	if b, err := call(ctx, c, "GET", url, "/v1/models", nil); err == nil {
		if m, err := DecodeModels(b); err == nil {
			switch m.Owner() {
			case "llamacpp":
				return KindLlamaCpp, `/v1/models says owned_by "llamacpp"`, nil
			case "vllm", "sglang":
				return KindVLLM, fmt.Sprintf("/v1/models says owned_by %q", m.Owner()), nil
			}
		}
	} else {
		errs = append(errs, err)
	}
	if b, err := call(ctx, c, "GET", url, "/props", nil); err == nil {
		if p, err := DecodeProps(b); err == nil {
			return KindLlamaCpp, fmt.Sprintf("/props names llama.cpp build %s", p.BuildInfo), nil
		}
	} else {
		errs = append(errs, err)
	}
	if len(errs) == 2 && errors.Is(errs[0], ErrUnreachable) && errors.Is(errs[1], ErrUnreachable) {
		return KindUnknown, "", errors.Join(errs...)
	}
	return KindUnknown, "", nil
}

// Check runs the connect checks once: the server is llama.cpp's, with
// /slots and /metrics on, serving spec.Model, tokenizing as spec.Tokenizer
// does. A refusal wraps ErrNotLlamaCpp, ErrEndpointOff, ErrModelMismatch
// or ErrTokenizerMismatch and says what differs; ErrUnreachable means try
// again.
func Check(ctx context.Context, c *http.Client, spec Spec) (*Server, error) {
	b, err := call(ctx, c, "GET", spec.URL, "/props", nil)
	if isStatus(err, http.StatusNotFound) {
		return nil, notLlama(ctx, c, spec.URL, "GET /props answered 404")
	}
	if err != nil {
		return nil, err
	}
	p, err := DecodeProps(b)
	if err != nil {
		return nil, err
	}
	switch {
	case !p.EndpointSlots:
		return nil, fmt.Errorf("%w: /slots is off (start llama-server with --slots)", ErrEndpointOff)
	case !p.EndpointMetrics:
		return nil, fmt.Errorf("%w: /metrics is off (start llama-server with --metrics)", ErrEndpointOff)
	}
	b, err = call(ctx, c, "GET", spec.URL, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	m, err := DecodeModels(b)
	if err != nil {
		return nil, err
	}
	if m.Owner() != "llamacpp" {
		return nil, fmt.Errorf("%w: /v1/models says owned_by %q, not \"llamacpp\"", ErrNotLlamaCpp, m.Owner())
	}
	if names := m.Names(); !slices.Contains(names, spec.Model) && p.ModelAlias != spec.Model {
		return nil, fmt.Errorf("%w: --model is %q but the server serves %q (%s): start llama-server with --alias %q, or pass --model %q",
			ErrModelMismatch, spec.Model, p.ModelAlias, p.ModelPath, spec.Model, p.ModelAlias)
	}
	if err := checkTokenizer(ctx, c, spec, p, m); err != nil {
		return nil, err
	}
	return &Server{Props: p, Models: m}, nil
}

// notLlama is the refusal of a server without /props, naming what it is
// when /v1/models says.
func notLlama(ctx context.Context, c *http.Client, url, why string) error {
	if b, err := call(ctx, c, "GET", url, "/v1/models", nil); err == nil {
		if m, err := DecodeModels(b); err == nil && m.Owner() != "" {
			hint := ""
			if m.Owner() == "vllm" || m.Owner() == "sglang" {
				hint = ": run kvgate-bridge with --engine-kind vllm"
			}
			return fmt.Errorf("%w: %s and /v1/models says owned_by %q%s", ErrNotLlamaCpp, why, m.Owner(), hint)
		}
	}
	return fmt.Errorf("%w: %s", ErrNotLlamaCpp, why)
}

// Connect runs Check until the server passes, refuses, or timeout passes
// (0: no limit; ctx bounds it either way), retrying a server that does not
// answer yet with a growing pause and a log line now and then. Refusals
// and other errors return at once.
func Connect(ctx context.Context, c *http.Client, spec Spec, timeout time.Duration, log *slog.Logger) (*Server, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	pause, lastLog := 100*time.Millisecond, time.Time{}
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := Check(actx, c, spec)
		cancel()
		if err == nil || !errors.Is(err, ErrUnreachable) {
			return s, err
		}
		if time.Since(lastLog) > 10*time.Second {
			log.Warn("llama.cpp server not ready; routers are not accepted until it is", "url", spec.URL, "err", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %v): %v", ErrUnreachable, ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// tokenizerProbes are the strings both tokenizers must agree on: prose,
// code, CJK, emoji (several tokens for one character), the chat template's
// special tokens, runs of spaces and digits. They are NFC: llama.cpp
// applies no normalizer, so text that is not in NFC may legitimately
// differ (see perf/gguf).
var tokenizerProbes = []string{
	"The quick brown fox jumps over the lazy dog. It wasn't me, they'd said.",
	"func main() {\n\tfmt.Println(\"héllo, wörld\")\n\treturn x != nil && y >= 0\n}\n",
	"日本語のテキストと中文混合，还有한국어와 Ελληνικά και русский текст.",
	"emoji 😀👍🏽🇫🇷 and symbols ∑∫√ ≠ ≤ → ©",
	"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	"   leading spaces,\ttabs\n\n\nnumbers 1234567890 3.14159 and 2024-12-01T09:00:00Z",
}

// checkTokenizer compares the server's tokenizer with kvgate's: the
// vocabulary fits, the end-of-sequence token is the same, and every probe
// tokenizes to the same ids (special tokens parsed, none added).
func checkTokenizer(ctx context.Context, c *http.Client, spec Spec, p *Props, m *Models) error {
	tok := spec.Tokenizer
	if n := m.VocabSize(); n != 0 && n < tok.VocabSize() {
		return fmt.Errorf("%w: the server's vocabulary has %d tokens, kvgate's %d", ErrTokenizerMismatch, n, tok.VocabSize())
	}
	if p.EOSToken != "" && tok.Config.EOS != "" && p.EOSToken != tok.Config.EOS {
		return fmt.Errorf("%w: the server's end-of-sequence token is %q, kvgate's %q", ErrTokenizerMismatch, p.EOSToken, tok.Config.EOS)
	}
	for i, probe := range tokenizerProbes {
		b, err := call(ctx, c, "POST", spec.URL, "/tokenize", map[string]any{"content": probe, "add_special": false, "parse_special": true})
		if err != nil {
			return err
		}
		theirs, err := DecodeTokenize(b)
		if err != nil {
			return err
		}
		ours := tok.Encode(nil, probe, false)
		if at := firstDifference(ours, theirs); at >= 0 {
			return fmt.Errorf("%w: probe %d (%q) tokenizes differently from token %d: kvgate %v, server %v (%d and %d tokens)",
				ErrTokenizerMismatch, i, probe, at, around(ours, at), around(theirs, at), len(ours), len(theirs))
		}
	}
	return nil
}

// DecodeTokenize decodes POST /tokenize's answer, {"tokens": [ids]}.
func DecodeTokenize(b []byte) ([]uint32, error) {
	var t struct {
		Tokens *[]uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(b, &t); err != nil || t.Tokens == nil {
		return nil, fmt.Errorf("%w: /tokenize: %s", ErrSchema, errorMessage(b))
	}
	return *t.Tokens, nil
}

// firstDifference is the first index where a and b differ, -1 if none.
func firstDifference(a, b []uint32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// around is ids[at-2:at+3], clipped.
func around(ids []uint32, at int) []uint32 {
	return ids[max(0, at-2):min(len(ids), at+3)]
}
