package gateway

import (
	"sync"

	"github.com/kvgate/kvgate/dataplane/api"
)

// genRequests holds the genRequests of responses that are over, with the
// room their encoder, body and prompt ids took: a plain request (one
// choice, wire engines) takes one, and gives it back when its response is
// over, for about 770 bytes, an allocation of the prompt's ids and an
// encoder's and a body buffer's pool round trips less a request. Only
// generate gives one back, once nothing can read it: not after a panic,
// a fan-out (a choice's goroutine may outlive the response) or a relay to
// an HTTP engine.
var genRequests = sync.Pool{New: func() any { return new(genRequest) }}

// maxKeptRoom bounds what a pooled genRequest keeps of each buffer.
const maxKeptRoom = 64 << 10

// putGenRequest gives gr back: every reference dropped, its buffers (of a
// bounded size) kept.
func putGenRequest(gr *genRequest) {
	gr.oai.Reset(api.OpenAIEncoder{})
	oai, body, ids := gr.oai, gr.out.body[:0], gr.ids
	if cap(body) > maxKeptRoom {
		body = nil
	}
	if cap(ids) > maxKeptRoom/4 {
		ids = nil
	}
	*gr = genRequest{oai: oai, ids: ids[:0]}
	gr.out.body = body
	genRequests.Put(gr)
}
