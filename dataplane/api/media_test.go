package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/media"
)

// pngOf is a w x h PNG; seed varies its pixels.
func pngOf(t *testing.T, w, h int, seed byte) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i) + seed
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

func chatWithImage(url string) string {
	return fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":"Be brief."},`+
		`{"role":"user","content":[{"type":"text","text":"What is"},{"type":"text","text":"in"},{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"this?"}]}]}`, url)
}

func anthropicWithImage(b64, mediaType string) string {
	return fmt.Sprintf(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"What is in"},`+
		`{"type":"image","source":{"type":"base64","media_type":%q,"data":%q}},{"type":"text","text":"this?"}]}]}`, mediaType, b64)
}

func TestChatImagePart(t *testing.T) {
	img := pngOf(t, 40, 30, 1)
	r, e := DecodeChat([]byte(chatWithImage(dataURL(img))), nil)
	if e != nil {
		t.Fatal(e)
	}
	c := r.Conversation
	if len(c.Images) != 1 || c.Images[0].Field != "messages[1].content[2]" || !bytes.Equal(c.Images[0].Source.Data, img) {
		t.Fatalf("images %+v", c.Images)
	}
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(c.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"text","text":"What is"},{"type":"text","text":"in"},{"type":"image"},{"type":"text","text":"this?"}]`
	if string(msgs[0].Content) != `"Be brief."` || string(msgs[1].Content) != want {
		t.Fatalf("content %s / %s, want the text and the image's place", msgs[0].Content, msgs[1].Content)
	}
	checkConversation(t, &c)
}

// One image gets one id through both APIs and all transports, and the
// id follows the bytes: another image gets another.
func TestImageIDAcrossAPIs(t *testing.T) {
	img, other := pngOf(t, 64, 64, 1), pngOf(t, 64, 64, 2)
	b64 := base64.StdEncoding.EncodeToString(img)
	decode := []func() (*Request, *Error){
		func() (*Request, *Error) { return DecodeChat([]byte(chatWithImage(dataURL(img))), nil) },
		func() (*Request, *Error) { return DecodeMessages([]byte(anthropicWithImage(b64, "image/png")), nil) },
		func() (*Request, *Error) {
			return DecodeResponses([]byte(fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":[`+
				`{"type":"input_text","text":"What is in this?"},{"type":"input_image","image_url":%q}]}]}`, dataURL(img))), nil)
		},
	}
	var ids []media.ID
	for i, d := range decode {
		r, e := d()
		if e != nil {
			t.Fatalf("decoder %d: %v", i, e)
		}
		if e := ResolveImages(context.Background(), &r.Conversation, &media.Resolver{}); e != nil {
			t.Fatalf("decoder %d: %v", i, e)
		}
		im := r.Conversation.Images[0].Resolved
		if im.Info != (media.Info{Format: media.PNG, Width: 64, Height: 64}) {
			t.Fatalf("decoder %d: %+v", i, im.Info)
		}
		ids = append(ids, im.ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("one image, ids %v", ids)
	}
	r, _ := DecodeChat([]byte(chatWithImage(dataURL(other))), nil)
	_ = ResolveImages(context.Background(), &r.Conversation, &media.Resolver{})
	if r.Conversation.Images[0].Resolved.ID == ids[0] {
		t.Fatal("another image, the same id")
	}
}

func TestImageErrorsNameThePart(t *testing.T) {
	img := pngOf(t, 64, 64, 1)
	b64 := base64.StdEncoding.EncodeToString(img)
	noFetch := &media.Resolver{}
	small := &media.Resolver{MaxBytes: int64(len(img) - 1)}
	fetcher, err := media.NewFetcher(media.FetchOptions{AllowHosts: []string{"img.example"}, MaxBytes: 1 << 20,
		Timeout: 5e9, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body string
		res        *media.Resolver
		param      string
		contains   string
	}{
		{"undecodable", chatWithImage("data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("not a png at all, sorry"))),
			noFetch, "messages[1].content[2]", "undecodable image"},
		{"cut short", chatWithImage(dataURL(img[:len(img)-30])), noFetch, "messages[1].content[2]", "undecodable image"},
		{"declared type", chatWithImage("data:image/jpeg;base64," + b64), noFetch, "messages[1].content[2]", "declared image/jpeg but the bytes are a PNG"},
		{"anthropic declared type", anthropicWithImage(b64, "image/gif"), noFetch, "messages.0.content.1", "declared image/gif"},
		{"over the limit", chatWithImage(dataURL(img)), small, "messages[1].content[2]", "over the limit"},
		{"no fetching", chatWithImage("https://img.example/cat.png"), noFetch, "messages[1].content[2]", "--media-allow-host"},
		{"host not allowed", chatWithImage("https://evil.example/cat.png"), &media.Resolver{Fetcher: fetcher},
			"messages[1].content[2]", `host "evil.example" is not among`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			decode := DecodeChat
			if strings.Contains(c.body, `"max_tokens"`) {
				decode = DecodeMessages
			}
			r, e := decode([]byte(c.body), nil)
			if e == nil {
				e = ResolveImages(context.Background(), &r.Conversation, c.res)
			}
			if e == nil || e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.contains) ||
				!strings.HasPrefix(e.Message, c.param+": ") {
				t.Fatalf("got %+v; want 400 on %s containing %q", e, c.param, c.contains)
			}
		})
	}
}

func TestImageParseRefusals(t *testing.T) {
	img := dataURL(pngOf(t, 8, 8, 1))
	cases := []struct {
		name, body string
		decode     func([]byte, ModelCheck) (*Request, *Error)
		param      string
		contains   string
	}{
		{"not base64", chatWithImage("data:image/png;base64,%%%"), DecodeChat, "messages[1].content[2]", "not valid base64"},
		{"ftp", chatWithImage("ftp://img.example/a.png"), DecodeChat, "messages[1].content[2]", "data: URL or an http(s) URL"},
		{"assistant image", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://a.example/x.png"}}]}]}`,
			DecodeMessages, "messages.0.content.0", "belong to user messages"},
		{"anthropic file source", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f_1"}}]}]}`,
			DecodeMessages, "messages.0.content.0", `source type "file" is not supported`},
		{"responses file_id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f_1"}]}]}`,
			DecodeResponses, "input[0].content[0].file_id", "file_id images are not supported"},
		{"openai assistant image", `{"model":"m","messages":[{"content":[{"type":"image_url","image_url":{"url":"` + img + `"}}],"role":"assistant"}]}`,
			DecodeChat, "messages[0].content[0]", "images belong to user messages, not assistant"},
		{"responses system image", `{"model":"m","input":[{"role":"system","content":[{"type":"input_image","image_url":"` + img + `"}]}]}`,
			DecodeResponses, "input[0].content[0]", "images belong to user messages, not system"},
		{"system image", `{"model":"m","max_tokens":5,"system":[{"type":"image","source":{"type":"url","url":"https://a.example/x.png"}}],"messages":[{"role":"user","content":"hi"}]}`,
			DecodeMessages, "system", "not supported here"},
		{"image in anthropic chat shape", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + img + `"}}]}]}`,
			DecodeMessages, "messages.0.content.0.type", `"image_url" is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := c.decode([]byte(c.body), nil)
			if e == nil || e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.contains) {
				t.Fatalf("got %+v; want 400 on %s containing %q", e, c.param, c.contains)
			}
		})
	}
}

// /tokenize's messages read images as a chat's do (the gateway places
// their tokens), naming a bad part the same way.
func TestTokenizeReadsImages(t *testing.T) {
	img := pngOf(t, 8, 8, 1)
	r, e := DecodeTokenize([]byte(chatWithImage(dataURL(img))))
	if e != nil {
		t.Fatal(e)
	}
	chat, e := DecodeChat([]byte(chatWithImage(dataURL(img))), nil)
	if e != nil {
		t.Fatal(e)
	}
	if len(r.Conversation.Images) != 1 || r.Conversation.Images[0].Field != chat.Conversation.Images[0].Field ||
		string(r.Conversation.Messages) != string(chat.Conversation.Messages) {
		t.Fatalf("tokenize %+v %s, chat %+v %s", r.Conversation.Images, r.Conversation.Messages, chat.Conversation.Images, chat.Conversation.Messages)
	}
	if _, e := DecodeTokenize([]byte(chatWithImage("ftp://x/y.png"))); e == nil || e.Param != chat.Conversation.Images[0].Field {
		t.Fatalf("a bad image part: %+v", e)
	}
}

func TestAnthropicImageBlock(t *testing.T) {
	img := pngOf(t, 20, 20, 3)
	r, e := DecodeMessages([]byte(anthropicWithImage(base64.StdEncoding.EncodeToString(img), "image/png")), nil)
	if e != nil {
		t.Fatal(e)
	}
	c := r.Conversation
	want := `[{"role":"user","content":[{"type":"text","text":"What is in"},{"type":"image"},{"type":"text","text":"this?"}]}]`
	if string(c.Messages) != want || len(c.Images) != 1 || c.Images[0].Field != "messages.0.content.1" ||
		!bytes.Equal(c.Images[0].Source.Data, img) || c.Images[0].Source.MediaType != "image/png" {
		t.Fatalf("messages %s, images %+v", c.Messages, c.Images)
	}
}
