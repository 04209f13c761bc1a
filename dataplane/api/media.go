package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvgate/kvgate/dataplane/media"
)

// Images in conversations: OpenAI Chat's image_url parts, Anthropic's
// image blocks and the Responses API's input_image parts are read into
// Conversation.Images, in the order they appear, and the message content
// that held them stays a list of parts, {"type": "text", "text"} and
// {"type": "image"} where each image goes, as HF chat templates take them
// (vLLM hands templates the same shape). Inline bytes (data URLs, base64
// sources) are decoded here; URLs are fetched, and every image probed
// and identified, by ResolveImages, which the gateway calls with the
// operator's limits once the model is known to take images.

// Image is one image of a conversation.
type Image struct {
	// Field names the content part as the client wrote it
	// (messages[1].content[2], messages.1.content.2, input[0].content[1]),
	// for errors about the image.
	Field string
	// Source is where the bytes are, as the request gave them.
	Source media.Source
	// Resolved is the image read and identified (ResolveImages); its ID is
	// zero until then.
	Resolved media.Image
	// Expansion is what the model's processor puts in the prompt for the
	// image, and Placed where it went in the prompt's token ids (the
	// gateway sets both: media.Place); the image's Resolved.ID is the
	// extra key of every block Placed overlaps.
	Expansion media.Expansion
	Placed    media.Range
}

// contentPart is a part of a message content that holds images.
type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text,omitempty"`
}

func textPart(s string) contentPart { return contentPart{Type: "text", Text: &s} }

// imageSink collects a conversation's images while its messages are
// normalized. A nil sink refuses image parts. placed says the
// messages come from a conversion (Anthropic, Responses) that has already
// read its images and left {"type": "image"} parts in their place.
type imageSink struct {
	images []Image
	placed bool
}

// MarshalJSON writes the message's Parts as its content when it has any
// (a message with images), else its text content.
func (m chatMessage) MarshalJSON() ([]byte, error) {
	type plain chatMessage
	if m.Parts == nil {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		plain
		Content []contentPart `json:"content"`
	}{plain(m), m.Parts})
}

// addImage records an image parsed from the part named field, or the
// error that names it.
func (s *imageSink) addImage(field string, src media.Source, err error) error {
	if err != nil {
		return fieldErrorf(field, "%s", clientText(err))
	}
	s.images = append(s.images, Image{Field: field, Source: src})
	return nil
}

// clientText is a media error as a client reads it, without the
// package prefix.
func clientText(err error) string {
	return strings.ReplaceAll(err.Error(), "media: ", "")
}

// ResolveImages fetches, probes and identifies each image of c with r,
// answering the first that fails with a 400 naming its part.
func ResolveImages(ctx context.Context, c *Conversation, r *media.Resolver) *Error {
	for i := range c.Images {
		im := &c.Images[i]
		res, err := r.Resolve(ctx, im.Source)
		if err != nil {
			return BadRequest(im.Field, fmt.Sprintf("%s: %s", im.Field, clientText(err)))
		}
		im.Resolved = res
	}
	return nil
}
