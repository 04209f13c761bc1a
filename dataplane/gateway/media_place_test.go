package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// qwenVLModel is a model with Qwen2.5-VL's tokenizer (Qwen2's, the
// builtin's vocabulary and vision tokens) and chat template
// (dataplane/tokenize/testdata/vision_chat_cases.json, checked there
// against @huggingface/jinja).
func qwenVLModel(t *testing.T) *Model {
	t.Helper()
	return qwenModelWith(t, "")
}

// qwenModelWith is qwenVLModel with another chat template ("" for
// Qwen2-VL's).
func qwenModelWith(t *testing.T, template string) *Model {
	t.Helper()
	var cases struct {
		Templates map[string]string `json:"templates"`
	}
	b, err := os.ReadFile(filepath.Join("..", "tokenize", "testdata", "vision_chat_cases.json"))
	if err == nil {
		err = json.Unmarshal(b, &cases)
	}
	if err != nil || cases.Templates["qwen2-vl"] == "" {
		t.Fatalf("the Qwen2-VL chat template: %v", err)
	}
	if template == "" {
		template = cases.Templates["qwen2-vl"]
	}
	tokJSON, cfgJSON, err := tokenize.BuiltinFiles()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": cfgJSON,
		tokenize.ChatTemplateFile: []byte(template)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenize.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Model{Name: model, Tok: tok}
}

// A Qwen2.5-VL conversation with two images: the chat template writes
// <|vision_start|><|image_pad|><|vision_end|> for each image part, and
// placement replaces each <|image_pad|> with as many as the processor
// makes for the image's size, at the marker's place, the rest of the
// prompt unchanged; the OpenAI data URL and the Anthropic base64 block
// give the same ids, ranges and content ids.
func TestPlaceMediaQwen25VL(t *testing.T) {
	m := qwenVLModel(t)
	qwen, err := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Media: &Media{Processors: map[string]media.Processor{model: qwen}}}
	a, b := testPNG(t, 1024, 768), testPNG(t, 640, 480)
	// smart_resize (factor 28, round half to even, within min/max
	// pixels): 1024x768 -> 1036x756, (756/14)*(1036/14)/4 = 999 tokens;
	// 640x480 -> 644x476, (476/14)*(644/14)/4 = 391 tokens.
	want := []int{54 * 74 / 4, 34 * 46 / 4}
	b64 := base64.StdEncoding.EncodeToString
	openai := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},`+
		`{"type":"text","text":"Compare this one"},{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":" with that one."}]}]}`,
		model, dataURLOf(a), dataURLOf(b))
	anthropic := fmt.Sprintf(`{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":[`+
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}},{"type":"text","text":"Compare this one"},`+
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}},{"type":"text","text":" with that one."}]}]}`,
		model, b64(a), b64(b))

	padID, _ := m.Tok.TokenID("<|image_pad|>")
	startID, _ := m.Tok.TokenID("<|vision_start|>")
	endID, _ := m.Tok.TokenID("<|vision_end|>")
	var first []uint32
	var firstImages []api.Image
	for _, api_ := range []struct {
		name   string
		decode func([]byte, api.ModelCheck) (*api.Request, *api.Error)
		body   string
	}{{"openai", api.DecodeChat, openai}, {"anthropic", api.DecodeMessages, anthropic}} {
		t.Run(api_.name, func(t *testing.T) {
			req, e := api_.decode([]byte(api_.body), nil)
			if e != nil {
				t.Fatal(e)
			}
			if e := g.checkMedia(m, req); e != nil {
				t.Fatal(e)
			}
			text, _, e := g.chatTokens(m, &req.Conversation, 0, req)
			if e != nil {
				t.Fatal(e)
			}
			ids, e := g.placeMedia(m, req, text)
			if e != nil {
				t.Fatal(e)
			}
			// Where the markers were in the template's ids, counted
			// independently of Place.
			var markers []int
			for i, id := range text {
				if id == padID {
					markers = append(markers, i)
				}
			}
			if len(markers) != 2 {
				t.Fatalf("the template wrote %d markers, want 2", len(markers))
			}
			imgs := req.Conversation.Images
			wantOffsets := []int{markers[0], markers[1] + want[0] - 1}
			for k, im := range imgs {
				r := im.Placed
				if r.Offset != wantOffsets[k] || r.Length != want[k] {
					t.Fatalf("image %d at %+v, want offset %d length %d", k, r, wantOffsets[k], want[k])
				}
				if ids[r.Offset-1] != startID || ids[r.Offset+r.Length] != endID {
					t.Fatalf("image %d is not between <|vision_start|> and <|vision_end|>", k)
				}
				for _, id := range ids[r.Offset : r.Offset+r.Length] {
					if id != padID {
						t.Fatalf("image %d's range holds token %d", k, id)
					}
				}
			}
			if len(ids) != len(text)-2+want[0]+want[1] {
				t.Fatalf("%d ids, want %d", len(ids), len(text)-2+want[0]+want[1])
			}
			// Outside the ranges, the prompt is the template's.
			rest := slices.Concat(ids[:imgs[0].Placed.Offset], ids[imgs[0].Placed.Offset+want[0]:imgs[1].Placed.Offset], ids[imgs[1].Placed.Offset+want[1]:])
			if wantRest := slices.DeleteFunc(slices.Clone(text), func(id uint32) bool { return id == padID }); !slices.Equal(rest, wantRest) {
				t.Fatalf("the text around the images changed")
			}
			if imgs[0].Resolved.ID != media.IDOf(a) || imgs[1].Resolved.ID != media.IDOf(b) {
				t.Fatalf("content ids %v %v, want the bytes'", imgs[0].Resolved.ID, imgs[1].Resolved.ID)
			}
			if first == nil {
				first, firstImages = ids, imgs
				return
			}
			if !slices.Equal(ids, first) {
				t.Fatalf("the two APIs give different ids")
			}
			for k := range imgs {
				if imgs[k].Resolved.ID != firstImages[k].Resolved.ID || imgs[k].Placed != firstImages[k].Placed {
					t.Fatalf("image %d: %v %+v vs %v %+v", k, imgs[k].Resolved.ID, imgs[k].Placed, firstImages[k].Resolved.ID, firstImages[k].Placed)
				}
			}
		})
	}
	if first == nil {
		t.Fatal("no API case ran")
	}
}

// A template that drops image parts (one that renders only text
// parts), or text that spells the marker
// itself, leaves a marker count that is not the image count: refused,
// and no range is kept.
func TestPlaceMediaMarkerCount(t *testing.T) {
	m := qwenVLModel(t)
	qwen, _ := media.NewProcessor("qwen2-vl", media.ProcessorOptions{})
	g := &Gateway{Media: &Media{Processors: map[string]media.Processor{model: qwen}}}
	img := dataURLOf(testPNG(t, 56, 56))
	spelled := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"text","text":"see <|image_pad|>"},`+
		`{"type":"image_url","image_url":{"url":%q}}]}]}`, model, img)
	textOnly := qwenModelWith(t, "{% for m in messages %}<|im_start|>{{ m.role }}\n{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}")
	for _, c := range []struct {
		name string
		m    *Model
		body string
	}{
		{"marker spelled in text", m, spelled},
		{"template without images", textOnly, imageChat(img)},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, e := api.DecodeChat([]byte(c.body), nil)
			if e == nil {
				e = g.checkMedia(c.m, req)
			}
			if e != nil {
				t.Fatal(e)
			}
			ids, _, e := g.chatTokens(c.m, &req.Conversation, 0, req)
			if e != nil {
				t.Fatal(e)
			}
			out, e := g.placeMedia(c.m, req, ids)
			if e == nil || e.Status != 400 || e.Param != "messages" || out != nil {
				t.Fatalf("placed %d ids, error %+v", len(out), e)
			}
			if req.Conversation.Images[0].Placed != (media.Range{}) {
				t.Fatalf("a range was kept: %+v", req.Conversation.Images[0].Placed)
			}
		})
	}
	// A 56x56 image is 4 tokens (56 is a multiple of 28: (56/14)^2/4).
	req, _ := api.DecodeChat([]byte(imageChat(img)), nil)
	_ = g.checkMedia(m, req)
	ids, _, _ := g.chatTokens(m, &req.Conversation, 0, req)
	out, e := g.placeMedia(m, req, ids)
	if e != nil || len(out) != len(ids)+3 || req.Conversation.Images[0].Placed.Length != 4 {
		t.Fatalf("%d -> %d ids, %+v, %v", len(ids), len(out), req.Conversation.Images[0].Placed, e)
	}
}
