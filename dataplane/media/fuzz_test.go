package media

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif"  // DecodeConfig's formats
	_ "image/jpeg" //
	_ "image/png"  //
	"strings"
	"testing"
)

// FuzzProbe: Probe never panics, and whatever it accepts has a positive
// size within the limits; where the standard library's decoders can read
// the same PNG, JPEG or GIF header, they agree on the size.
func FuzzProbe(f *testing.F) {
	for _, fm := range []Format{PNG, JPEG, GIF, WebP} {
		img := testImage(f, fm, 37, 21, 3)
		f.Add(img)
		f.Add(img[:len(img)/2])
	}
	f.Add(webpVP8(640, 480))
	f.Add(webpVP8X(3, 5))
	f.Add([]byte{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Probe(b)
		if err != nil {
			return
		}
		if info.Width <= 0 || info.Height <= 0 || info.Width*info.Height > MaxPixels {
			t.Fatalf("accepted %+v", info)
		}
		if info.Format == WebP {
			return
		}
		cfg, name, err := image.DecodeConfig(bytes.NewReader(b))
		if err == nil && name == map[Format]string{PNG: "png", JPEG: "jpeg", GIF: "gif"}[info.Format] &&
			(cfg.Width != info.Width || cfg.Height != info.Height) {
			t.Fatalf("Probe %dx%d, image/%s %dx%d", info.Width, info.Height, name, cfg.Width, cfg.Height)
		}
	})
}

// FuzzSources: the content-part parsers never panic, and a data URL
// they accept decodes to as many bytes as its payload encodes. Line
// breaks in the payload (MIME wraps base64 at 76 columns) carry no data:
// encoding/base64 skips them, and so does the count here.
func FuzzSources(f *testing.F) {
	img := testImage(f, PNG, 4, 4, 1)
	f.Add("data:image/png;base64," + base64.StdEncoding.EncodeToString(img))
	f.Add(`{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(img) + `"}`)
	f.Add(`{"type":"url","url":"https://a.example/x.png"}`)
	f.Add(`{"url":"data:;base64,"}`)
	f.Fuzz(func(t *testing.T, s string) {
		if src, err := ParseDataURL(s); err == nil {
			_, payload, _ := strings.Cut(s, ",")
			payload = strings.NewReplacer("\r", "", "\n", "").Replace(payload)
			if want := base64.RawStdEncoding.DecodedLen(len(strings.TrimRight(payload, "="))); len(src.Data) != want {
				t.Fatalf("data URL %q decoded to %d bytes, want %d", s, len(src.Data), want)
			}
		}
		_, _ = ParseAnthropicImage(json.RawMessage(s))
		_, _ = ParseOpenAIImage(json.RawMessage(s))
	})
}

// FuzzExpand: no processor panics or gives a negative count on any size.
func FuzzExpand(f *testing.F) {
	f.Add(448, 448, uint8(0))
	f.Add(28, 5600, uint8(1))
	f.Add(1, 100000, uint8(4))
	names := []string{"qwen2-vl", "qwen2.5-vl", "qwen3-vl", "gemma3", "llama4"}
	f.Fuzz(func(t *testing.T, w, h int, which uint8) {
		if w <= 0 || h <= 0 || w > maxSide || h > maxSide {
			return
		}
		p, _ := NewProcessor(names[int(which)%len(names)], ProcessorOptions{})
		e, err := p.Expand(w, h)
		if err == nil && (e.Tokens() <= 0 || e.Features <= 0) {
			t.Fatalf("%s %dx%d: %+v", p.Name(), w, h, e)
		}
	})
}
