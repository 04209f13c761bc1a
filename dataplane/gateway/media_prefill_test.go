package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// A model whose only engine that takes images is prefill-only cannot
// serve an image (a request is served whole, or split onto a decode side
// that takes images too): the answer is a 400 naming the first image and
// why, in each API's shape, not the 503 of a model without ready engines.
// Text is still served by the engine without images.
func TestImagesOnlyPrefillTakesThem(t *testing.T) {
	prefill := func(c *sim.Config) { c.ID, c.Rank.Disagg.Role = "prefill-0", wire.RolePrefill }
	noImages := func(c *sim.Config) { c.ID, c.NoMultimodal = "text-0", true }
	f := imageGateway(t, media.Resolver{}, prefill, noImages)
	const why = "are prefill-only, and no engine that takes images serves a request whole or decodes one"

	resp, body := post(t, f.base+"/v1/chat/completions", "", openAIImage(patternPNG(t, 56, 56, 1), ""))
	var oe struct {
		Error struct{ Message, Param string }
	}
	if err := json.Unmarshal([]byte(body), &oe); err != nil || resp.StatusCode != 400 || oe.Error.Param != "messages[0].content[0]" ||
		!strings.Contains(oe.Error.Message, "engines of model "+model+" do not accept images (the 1 of its 2 ready engines") ||
		!strings.Contains(oe.Error.Message, why) {
		t.Fatalf("OpenAI: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, f.base+"/v1/messages", "", anthropicImage(patternPNG(t, 56, 56, 1)))
	var ae struct {
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(body), &ae); err != nil || resp.StatusCode != 400 ||
		!strings.HasPrefix(ae.Error.Message, "messages.0.content.0: engines of model "+model+" do not accept images") ||
		!strings.Contains(ae.Error.Message, why) {
		t.Fatalf("Anthropic: %d %s", resp.StatusCode, body)
	}
	text := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, model)
	if got := serve(t, f.testGateway, "/v1/chat/completions", text); got.engine != "text-0" {
		t.Fatalf("text served by %q", got.engine)
	}
}
