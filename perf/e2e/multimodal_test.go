//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// visionModel is the model the multimodal tests serve: Qwen2.5-VL's
// processor over the builtin Qwen vocabulary and Qwen2-VL's chat template
// (visionModelDir).
const visionModel = "Qwen/Qwen2.5-VL-7B-Instruct"

// questions are a conversation's three user turns after the image; the
// first is long enough that the block holding the image's last
// placeholder token is full in the first turn's prompt.
var questions = []string{
	"Describe this picture in detail, corner by corner, naming every shape and shade of grey that you can see in it.",
	"Which part of it is the brightest?",
	"And the darkest?",
}

// TestMultimodalConversation is issue 24 through the processes: kvgate
// with Qwen2.5-VL's image processor in front of three kvgate-sim engines
// that take images and one started with --multimodal=false. A three-turn
// conversation about one image, through the OpenAI Chat API (a data URL)
// and through Anthropic Messages (a base64 block), has turns 2 and 3
// served by the engine of turn 1, cached through the image; the first
// turn again with another image is cached only before the image's first
// block. The engine without images never serves one, and a kvgate whose
// only engine takes no images refuses them with a 400 naming the part.
func TestMultimodalConversation(t *testing.T) {
	addrs := visionEngines(t, 3)
	textAddr := startVisionSim(t, "text-0", "--multimodal=false")
	vision := visionFlags(t)
	_, base := startKvgate(t, append(vision, "--engine", strings.Join(append(addrs, textAddr), ","))...)
	waitEngines(t, admins[base], 4)

	// Each API's conversation has its own image, and its own other image.
	images := [][]byte{grayPNG(t, 640, 480, 1), grayPNG(t, 640, 480, 2), grayPNG(t, 640, 480, 3), grayPNG(t, 640, 480, 4)}
	for i, api := range []chatAPI{openAIChat{}, anthropicMessages{}} {
		t.Run(api.name(), func(t *testing.T) {
			img := images[i]
			through, before := imageSpan(t, base, img)
			var msgs []any
			engine := ""
			for turn, q := range questions {
				msgs = append(msgs, api.user(img, q, turn == 0))
				got := api.send(t, base, msgs)
				t.Logf("turn %d: served by %s, %d tokens cached (the image ends at %d)", turn+1, got.engine, got.cached, through)
				if got.engine == "text-0" {
					t.Fatalf("turn %d: the engine without images served one", turn+1)
				}
				if turn == 0 {
					engine = got.engine
				} else if got.engine != engine || got.cached < through {
					t.Fatalf("turn %d: served by %s with %d tokens cached; want %s (turn 1's) with at least %d (through the image)",
						turn+1, got.engine, got.cached, engine, through)
				}
				msgs = append(msgs, map[string]any{"role": "assistant", "content": got.text})
			}
			// The first turn with another image: the text before the image
			// may be cached, nothing from the image's first block on.
			other := api.send(t, base, []any{api.user(images[2+i], questions[0], true)})
			t.Logf("another image, the same text: served by %s, %d tokens cached", other.engine, other.cached)
			if other.engine == "text-0" || other.cached > before {
				t.Fatalf("another image: %d tokens cached on %s; at most %d (the blocks before the image) on an engine that takes images",
					other.cached, other.engine, before)
			}
		})
	}

	// Only the engine without images: a request with one is refused by
	// kvgate naming the part, in each API's shape; text is served.
	_, textOnly := startKvgate(t, append(vision, "--engine", textAddr)...)
	waitEngines(t, admins[textOnly], 1)
	resp, body := post(t, textOnly+"/v1/chat/completions", map[string]any{"model": visionModel, "max_tokens": 2,
		"messages": []any{openAIChat{}.user(images[0], questions[0], true)}})
	var oe struct {
		Error struct{ Message, Param string }
	}
	if json.Unmarshal(body, &oe) != nil || resp.StatusCode != 400 || oe.Error.Param != "messages[0].content[0]" ||
		!strings.Contains(oe.Error.Message, "engines of model "+visionModel+" do not accept images") {
		t.Fatalf("OpenAI, no engine takes images: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, textOnly+"/v1/messages", map[string]any{"model": visionModel, "max_tokens": 2,
		"messages": []any{anthropicMessages{}.user(images[0], questions[0], true)}})
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if json.Unmarshal(body, &ae) != nil || resp.StatusCode != 400 || ae.Type != "error" ||
		!strings.HasPrefix(ae.Error.Message, "messages.0.content.0: engines of model "+visionModel+" do not accept images") {
		t.Fatalf("Anthropic, no engine takes images: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, textOnly+"/v1/chat/completions", map[string]any{"model": visionModel, "max_tokens": 2,
		"messages": []any{map[string]any{"role": "user", "content": questions[1]}}})
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-engine") != "text-0" {
		t.Fatalf("text to the engine without images: %d %s", resp.StatusCode, body)
	}
}

// waitEngines waits until n wire engines are ready in kvgate's
// /debug/state.
func waitEngines(t *testing.T, admin string, n int) {
	t.Helper()
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		states, err := engineStates(admin)
		ready := 0
		for _, s := range states {
			if s == "ready" {
				ready++
			}
		}
		if err != nil || ready < n {
			return fmt.Errorf("%d of %d engines ready (%v): %v", ready, n, err, states)
		}
		return nil
	})
}

// imageSpan asks kvgate's /tokenize for the placed prompt of a first turn
// about img and returns the tokens up to and including the image's
// placeholders, and the tokens of the whole blocks before the image's
// first one (16 tokens a block, kvgate-sim's default). Both APIs render
// the turn alike (no system message: the template's default).
func imageSpan(t *testing.T, base string, img []byte) (through, before int) {
	t.Helper()
	body := map[string]any{"model": visionModel, "messages": []any{openAIChat{}.user(img, questions[0], true)}}
	resp, raw := post(t, base+"/tokenize", body)
	var tk struct{ Tokens []uint32 }
	if err := json.Unmarshal(raw, &tk); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/tokenize: %d %s", resp.StatusCode, raw)
	}
	const imagePad = 151655 // <|image_pad|> in the Qwen vocabulary
	first, last := slices.Index(tk.Tokens, imagePad), -1
	for i, id := range tk.Tokens {
		if id == imagePad {
			last = i
		}
	}
	if first < 0 || last-first+1 != 391 { // 640x480 under Qwen2.5-VL: 391 placeholders
		t.Fatalf("/tokenize: placeholders from %d to %d of %d tokens, want 391", first, last, len(tk.Tokens))
	}
	return last + 1, first / 16 * 16
}

// turn is what a test reads of one answer.
type turn struct {
	engine, text string
	cached       int
}

// chatAPI is one API's way to send a conversation with an image.
type chatAPI interface {
	name() string
	// user is a user message: the image (when withImage) then the text.
	user(img []byte, text string, withImage bool) map[string]any
	send(t *testing.T, base string, msgs []any) turn
}

type openAIChat struct{}

func (openAIChat) name() string { return "openai" }

func (openAIChat) user(img []byte, text string, withImage bool) map[string]any {
	parts := []any{map[string]any{"type": "text", "text": text}}
	if withImage {
		url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
		parts = append([]any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}}, parts...)
	}
	return map[string]any{"role": "user", "content": parts}
}

func (openAIChat) send(t *testing.T, base string, msgs []any) turn {
	t.Helper()
	resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": visionModel, "max_tokens": 8, "messages": msgs})
	var out struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	return turn{engine: resp.Header.Get("x-kvgate-engine"), text: out.Choices[0].Message.Content, cached: out.Usage.Details.Cached}
}

type anthropicMessages struct{}

func (anthropicMessages) name() string { return "anthropic" }

func (anthropicMessages) user(img []byte, text string, withImage bool) map[string]any {
	blocks := []any{map[string]any{"type": "text", "text": text}}
	if withImage {
		src := map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(img)}
		blocks = append([]any{map[string]any{"type": "image", "source": src}}, blocks...)
	}
	return map[string]any{"role": "user", "content": blocks}
}

func (anthropicMessages) send(t *testing.T, base string, msgs []any) turn {
	t.Helper()
	resp, body := post(t, base+"/v1/messages", map[string]any{"model": visionModel, "max_tokens": 8, "messages": msgs})
	var out struct {
		Content []struct{ Text string }
		Usage   struct {
			Cached int `json:"cache_read_input_tokens"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	var text strings.Builder
	for _, c := range out.Content {
		text.WriteString(c.Text)
	}
	return turn{engine: resp.Header.Get("x-kvgate-engine"), text: text.String(), cached: out.Usage.Cached}
}
