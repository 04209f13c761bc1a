package media

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseDataURL(t *testing.T) {
	img := testImage(t, PNG, 8, 8, 1)
	b64 := base64.StdEncoding.EncodeToString(img)
	for _, u := range []string{"data:image/png;base64," + b64, "data:image/png;base64," + strings.TrimRight(b64, "=")} {
		s, err := ParseDataURL(u)
		if err != nil || string(s.Data) != string(img) || s.MediaType != "image/png" {
			t.Fatalf("ParseDataURL(%.40q) = %q, %v", u, s.MediaType, err)
		}
	}
	for _, u := range []string{"data:image/png," + b64, "data:image/png;base64", "data:image/png;base64,@@@", "http://x/y.png"} {
		if _, err := ParseDataURL(u); !errors.Is(err, ErrSource) {
			t.Errorf("ParseDataURL(%.40q) = %v, want ErrSource", u, err)
		}
	}
}

func TestParseAnthropicImage(t *testing.T) {
	img := testImage(t, GIF, 8, 8, 1)
	raw := fmt.Sprintf(`{"type":"base64","media_type":"image/gif","data":%q}`, base64.StdEncoding.EncodeToString(img))
	s, err := ParseAnthropicImage(json.RawMessage(raw))
	if err != nil || string(s.Data) != string(img) || s.MediaType != "image/gif" {
		t.Fatalf("base64 source: %q, %v", s.MediaType, err)
	}
	s, err = ParseAnthropicImage(json.RawMessage(`{"type":"url","url":"https://img.example/a.png"}`))
	if err != nil || s.URL != "https://img.example/a.png" {
		t.Fatalf("url source: %+v, %v", s, err)
	}
	for _, raw := range []string{`{"type":"base64","data":"AAAA"}`, `{"type":"file","file_id":"f"}`,
		`{"type":"url","url":"ftp://x/y"}`, `"x"`, `{"type":"base64","media_type":"image/png","data":"!!"}`} {
		if _, err := ParseAnthropicImage(json.RawMessage(raw)); !errors.Is(err, ErrSource) {
			t.Errorf("%s: %v, want ErrSource", raw, err)
		}
	}
}

// The content id is the bytes' and only the bytes': a data URL, an
// Anthropic base64 block and a fetched URL of one image agree, and
// another image differs.
func TestIDIgnoresTransport(t *testing.T) {
	img := testImage(t, JPEG, 64, 48, 1)
	other := testImage(t, JPEG, 64, 48, 2)
	b64 := base64.StdEncoding.EncodeToString(img)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		_, _ = w.Write(img)
	}))
	defer srv.Close()
	o := Defaults()
	o.AllowHosts, o.AllowPrivate = []string{"127.0.0.1"}, true
	f, err := NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Fetcher: f}

	var sources []Source
	s, err := ParseOpenAIImage(json.RawMessage(fmt.Sprintf(`{"url":"data:image/jpeg;base64,%s","detail":"high"}`, b64)))
	sources = append(sources, s)
	s2, err2 := ParseAnthropicImage(json.RawMessage(fmt.Sprintf(`{"type":"base64","media_type":"image/jpeg","data":%q}`, b64)))
	sources = append(sources, s2, Source{URL: srv.URL + "/cat.jpg"})
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	var ids []ID
	for _, s := range sources {
		im, err := r.Resolve(context.Background(), s)
		if err != nil {
			t.Fatalf("Resolve(%+v): %v", s.URL, err)
		}
		if im.Info != (Info{JPEG, 64, 48}) {
			t.Fatalf("info %+v", im.Info)
		}
		ids = append(ids, im.ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] || ids[0].IsZero() {
		t.Fatalf("one image, three transports, ids %v", ids)
	}
	if IDOf(other) == ids[0] {
		t.Fatal("two images share an id")
	}
	if got := ids[0].String(); len(got) != 32 || got != IDOf(img).String() {
		t.Fatalf("String() = %q", got)
	}
}

func TestResolveRefuses(t *testing.T) {
	png := testImage(t, PNG, 64, 64, 1)
	r := &Resolver{MaxBytes: int64(len(png) - 1)}
	ctx := context.Background()
	if _, err := r.Resolve(ctx, Source{Data: png}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over MaxBytes: %v", err)
	}
	r.MaxBytes = 0
	if _, err := r.Resolve(ctx, Source{Data: png, MediaType: "image/webp"}); !errors.Is(err, ErrMediaType) {
		t.Errorf("declared webp, bytes png: %v", err)
	}
	if _, err := r.Resolve(ctx, Source{Data: png[:100], MediaType: "image/png"}); !errors.Is(err, ErrUndecodable) {
		t.Errorf("cut png: %v", err)
	}
	if _, err := r.Resolve(ctx, Source{URL: "https://img.example/a.png"}); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("url without a fetcher: %v", err)
	}
}
