package media

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Source is where an image's bytes are: Data when the request carried
// them (a data URL, a base64 block), else URL, to fetch. MediaType is the
// type the request declared ("" when it declared none).
type Source struct {
	Data      []byte
	URL       string
	MediaType string
}

// ParseDataURL decodes an RFC 2397 data URL whose payload is base64
// ("data:image/png;base64,...").
func ParseDataURL(u string) (Source, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return Source{}, fmt.Errorf("%w: not a data: URL", ErrSource)
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return Source{}, fmt.Errorf("%w: data URL without a comma before its data", ErrSource)
	}
	params := strings.Split(meta, ";")
	if params[len(params)-1] != "base64" {
		return Source{}, fmt.Errorf("%w: data URL is not base64 (want data:<media type>;base64,<data>)", ErrSource)
	}
	data, err := decodeBase64(payload)
	if err != nil {
		return Source{}, err
	}
	return Source{Data: data, MediaType: params[0]}, nil
}

// decodeBase64 reads standard base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("%w: image data is not valid base64", ErrSource)
		}
	}
	return b, nil
}

// ParseOpenAIImage reads an OpenAI Chat image_url part's image_url
// value: {"url": "data:..." | "https://...", "detail": ...} (or the URL as
// a bare string, as vLLM accepts).
func ParseOpenAIImage(raw json.RawMessage) (Source, error) {
	var u struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(raw, &u.URL) != nil {
		if err := json.Unmarshal(raw, &u); err != nil {
			return Source{}, fmt.Errorf("%w: image_url must be an object with a url", ErrSource)
		}
	}
	return sourceOfURL(u.URL)
}

// ParseResponsesImage reads a Responses input_image part's image_url (a
// string, not an object).
func ParseResponsesImage(raw json.RawMessage) (Source, error) {
	var u string
	if err := json.Unmarshal(raw, &u); err != nil {
		return Source{}, fmt.Errorf("%w: image_url must be a string", ErrSource)
	}
	return sourceOfURL(u)
}

func sourceOfURL(u string) (Source, error) {
	switch {
	case u == "":
		return Source{}, fmt.Errorf("%w: the image has no url", ErrSource)
	case strings.HasPrefix(u, "data:"):
		return ParseDataURL(u)
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"):
		return Source{URL: u}, nil
	}
	return Source{}, fmt.Errorf("%w: image url must be a data: URL or an http(s) URL", ErrSource)
}

// ParseAnthropicImage reads an Anthropic image block's source:
// {"type": "base64", "media_type", "data"} or {"type": "url", "url"}.
func ParseAnthropicImage(raw json.RawMessage) (Source, error) {
	var s struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Source{}, fmt.Errorf("%w: source must be an object", ErrSource)
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" {
			return Source{}, fmt.Errorf("%w: a base64 source needs media_type", ErrSource)
		}
		data, err := decodeBase64(s.Data)
		if err != nil {
			return Source{}, err
		}
		return Source{Data: data, MediaType: s.MediaType}, nil
	case "url":
		if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return Source{}, fmt.Errorf("%w: a url source needs an http(s) url", ErrSource)
		}
		return Source{URL: s.URL}, nil
	}
	return Source{}, fmt.Errorf("%w: source type %q is not supported (base64, url)", ErrSource, s.Type)
}
