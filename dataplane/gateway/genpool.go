package gateway

import (
	"sync"
	"unsafe"

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

// responseID is the response's id, prefix and the request's, in gr's own
// room, no allocation: only the encoder holds it, and only while gr serves
// this request (gr is given back once the response is over; a fan-out's
// choices, which copy the encoder, run on a genRequest never given back).
func (gr *genRequest) responseID(prefix string) string {
	gr.respID = append(append(gr.respID[:0], prefix...), gr.id...)
	return unsafe.String(unsafe.SliceData(gr.respID), len(gr.respID))
}

// putGenRequest gives gr back: every reference dropped, its buffers (of a
// bounded size) kept.
func putGenRequest(gr *genRequest) {
	gr.oai.Reset(api.OpenAIEncoder{})
	oai, body, ids, respID := gr.oai, gr.out.body[:0], gr.ids, gr.respID[:0]
	if cap(body) > maxKeptRoom {
		body = nil
	}
	if cap(ids) > maxKeptRoom/4 {
		ids = nil
	}
	if cap(respID) > maxKeptRoom {
		respID = nil
	}
	*gr = genRequest{oai: oai, ids: ids[:0], respID: respID}
	gr.out.body = body
	genRequests.Put(gr)
}
