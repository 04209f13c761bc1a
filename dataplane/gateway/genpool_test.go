package gateway

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/wire"
)

// TestPutGenRequestForgetsRequest: a genRequest given back keeps only its
// buffers' room (body, prompt ids, response id, the encoder's text), nothing of the
// request it served, so the next request that takes it starts as from a
// new one; and what is too large is not kept.
func TestPutGenRequestForgetsRequest(t *testing.T) {
	gr := &genRequest{Request: &api.Request{Model: "m"}, id: "r1", tokens: []uint32{1, 2}, model: &Model{}, parser: &plainOutput,
		prompt: "p", x: &exchange{}, ids: make([]uint32, 3, 40), choice: 2}
	gr.gen = wire.Generate{MaxTokens: 5, Prompt: wire.TokensOf(gr.tokens)}
	gr.rr.Model, gr.rr.Tokens = "m", gr.tokens
	gr.out = output{enc: &gr.oai, started: true, buf: []byte("x"), body: append(make([]byte, 0, 512), "old body"...)}
	if id := gr.responseID("cmpl-"); id != "cmpl-r1" {
		t.Fatalf("response id %q", id)
	}
	gr.oai.Reset(api.OpenAIEncoder{ID: gr.responseID("chatcmpl-"), Model: "m", Echo: "e"})
	gr.oai.Delta(nil, api.Piece{Kind: api.PieceText, Text: "old text"})
	putGenRequest(gr)

	kept := *gr
	if cap(kept.out.body) != 512 || len(kept.out.body) != 0 || cap(kept.ids) != 40 || len(kept.ids) != 0 || cap(kept.respID) == 0 || len(kept.respID) != 0 {
		t.Fatalf("buffers not kept empty: body %d/%d, ids %d/%d, response id %d/%d", len(kept.out.body), cap(kept.out.body),
			len(kept.ids), cap(kept.ids), len(kept.respID), cap(kept.respID))
	}
	kept.out.body, kept.ids, kept.respID, kept.oai = nil, nil, nil, api.OpenAIEncoder{}
	if !reflect.ValueOf(kept).IsZero() {
		t.Fatalf("request state left: %+v", kept)
	}
	end := api.End{Finish: api.FinishStop}
	fresh := api.OpenAIEncoder{ID: "cmpl-r2", Model: "n"}
	gr.oai.Reset(fresh)
	if got, want := gr.oai.Close(nil, end), fresh.Close(nil, end); !bytes.Equal(got, want) {
		t.Fatalf("the kept encoder encodes\n%s\nwant\n%s", got, want)
	}

	big := &genRequest{ids: make([]uint32, 0, maxKeptRoom), out: output{body: make([]byte, 0, maxKeptRoom+1)}}
	putGenRequest(big)
	if big.ids != nil || big.out.body != nil {
		t.Fatalf("kept %d ids and %d body bytes of room, over the bound", cap(big.ids), cap(big.out.body))
	}
}
