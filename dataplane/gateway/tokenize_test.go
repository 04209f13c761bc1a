package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// TestChatPromptTurns serves a conversation turn by turn for two tenants,
// as the gateway renders and tokenizes prompts, and checks each turn's
// ids and text against a template that has rendered nothing before.
func TestChatPromptTurns(t *testing.T) {
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	g, m := &Gateway{}, &Model{Name: "m", Tok: tok}
	var msgs []string
	for turn := range 4 {
		if turn > 0 {
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"Reply %d, at some length so that the ids are worth reusing."}`, turn))
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"Question %d: what comes next?"}`, turn))
		body := `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
		for _, tenant := range []string{"a", "b"} {
			req, e := api.DecodeChat([]byte(body), nil)
			if e != nil {
				t.Fatal(e)
			}
			ids, text, e := g.chatPrompt(m, &req.Conversation, 0, req, tenant)
			if e != nil {
				t.Fatal(e)
			}
			fresh, err := tokenize.NewChatTemplate(tok.Chat().Source(), tok.Config.BOS, tok.Config.EOS)
			if err != nil {
				t.Fatal(err)
			}
			c := &req.Conversation
			want, err := fresh.Render(&tokenize.ChatInput{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Extra: c.Kwargs})
			if err != nil || text != want || !slices.Equal(ids, tok.Encode(nil, want, false)) {
				t.Fatalf("turn %d, tenant %s: text equal %v, ids equal %v (%v)", turn, tenant, text == want, slices.Equal(ids, tok.Encode(nil, want, false)), err)
			}
		}
	}
}

// TestTenantOf: requests with other credentials are other tenants.
func TestTenantOf(t *testing.T) {
	req := func(headers ...string) *httpx.Request {
		r := &httpx.Request{}
		for i := 0; i < len(headers); i += 2 {
			r.Header = append(r.Header, httpx.Field{Name: headers[i], Value: headers[i+1]})
		}
		return r
	}
	a, b, none := tenantOf(req("Authorization", "Bearer a")), tenantOf(req("Authorization", "Bearer b")), tenantOf(req())
	if a == b || a == none || tenantOf(req("x-api-key", "a")) == a || tenantOf(req("Authorization", "Bearer a")) != a {
		t.Fatalf("tenants %q %q %q", a, b, none)
	}
}
