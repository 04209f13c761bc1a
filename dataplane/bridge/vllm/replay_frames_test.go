package vllm

import (
	"bytes"
	"testing"
)

// TestReplyFrames: replay replies as a DEALER receives them, written by
// hand from each publisher's _service_replay (see replay.go): vLLM at
// b4e69e0 and 0181ea3 and SGLang at 612d579 (| (empty) | seq | payload |),
// the later kv_events.py with the topic (| (empty) | topic | seq | payload |,
// its end marker's topic empty), each with and without the delimiter a
// ZMQ library may hand over; anything else is refused.
func TestReplyFrames(t *testing.T) {
	seq7 := []byte{0, 0, 0, 0, 0, 0, 0, 7}
	end := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	payload := []byte{0x93, 0xcb}
	e := []byte{}
	for _, c := range []struct {
		name    string
		frames  [][]byte
		seq     uint64
		payload []byte
		ok      bool
	}{
		{"vllm/sglang reply", [][]byte{e, seq7, payload}, 7, payload, true},
		{"vllm/sglang end", [][]byte{e, end, e}, endSeq, e, true},
		{"vllm/sglang reply, no delimiter", [][]byte{seq7, payload}, 7, payload, true},
		{"topic reply", [][]byte{e, []byte("kv@m"), seq7, payload}, 7, payload, true},
		{"topic reply, empty topic", [][]byte{e, e, seq7, payload}, 7, payload, true},
		{"topic end", [][]byte{e, e, end, e}, endSeq, e, true},
		{"topic reply, no delimiter", [][]byte{[]byte("kv@m"), seq7, payload}, 7, payload, true},
		{"short sequence number", [][]byte{e, []byte{7}, payload}, 0, nil, false},
		{"sequence number alone", [][]byte{e, seq7}, 0, nil, false},
		{"too many frames", [][]byte{e, e, e, seq7, payload}, 0, nil, false},
		{"nothing", nil, 0, nil, false},
	} {
		seq, p, ok := replyFrames(c.frames)
		if ok != c.ok || seq != c.seq || !bytes.Equal(p, c.payload) {
			t.Errorf("%s: seq %d payload % x ok %v; want %d % x %v", c.name, seq, p, ok, c.seq, c.payload, c.ok)
		}
	}
}
