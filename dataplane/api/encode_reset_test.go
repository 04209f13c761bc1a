package api

import (
	"bytes"
	"testing"
)

// TestOpenAIEncoderResetForgetsResponse: an encoder Reset after a
// response with text, reasoning and a tool call encodes the next one as a
// new encoder would, and collects its body in the room it kept.
func TestOpenAIEncoderResetForgetsResponse(t *testing.T) {
	end := End{Finish: FinishStop, Usage: Usage{Prompt: 3, Completion: 2}}
	fresh := func() OpenAIEncoder { return OpenAIEncoder{ID: "cmpl-2", Model: "m", Created: 7} }
	second := func(o *OpenAIEncoder) []byte {
		o.Delta(nil, Piece{Kind: PieceText, Text: "hi"})
		return o.Close(nil, end)
	}
	used := &OpenAIEncoder{ID: "chatcmpl-1", Model: "other", Created: 5, Chat: true}
	used.Delta(nil, Piece{Kind: PieceReasoning, Text: "thinking"})
	used.Delta(nil, Piece{Kind: PieceText, Text: "a long first answer"})
	used.Delta(nil, Piece{Kind: PieceToolCall, Name: "f", Text: `{"x":1}`})
	used.Close(nil, end)
	used.Reset(fresh())
	kept := cap(used.all.Text)
	got := second(used)
	n := fresh()
	if want := second(&n); !bytes.Equal(got, want) {
		t.Fatalf("after Reset:\n%s\nwant\n%s", got, want)
	}
	if kept == 0 || cap(used.all.Text) != kept {
		t.Fatalf("text room %d after Reset, %d after the body: want it kept", kept, cap(used.all.Text))
	}
	if raceEnabled {
		return // allocation counts are checked without -race
	}
	used.Reset(fresh())
	if allocs := testing.AllocsPerRun(100, func() {
		used.Reset(fresh())
		used.Delta(nil, Piece{Kind: PieceText, Text: "hi"})
	}); allocs != 0 {
		t.Fatalf("collecting a body in a Reset encoder: %v allocations, want 0", allocs)
	}
}

// TestOpenAIEncoderCloneSharesNoRoom: a clone of a Reset encoder (whose
// kept room a plain copy would share) collects its own text: neither
// encoder's body shows the other's.
func TestOpenAIEncoderCloneSharesNoRoom(t *testing.T) {
	o := &OpenAIEncoder{ID: "cmpl-1", Model: "m"}
	o.Delta(nil, Piece{Kind: PieceText, Text: "a first answer, long enough to leave room"})
	o.Reset(OpenAIEncoder{ID: "cmpl-2", Model: "m"})
	c := o.Clone()
	c.Index, c.Part = 1, true
	o.Delta(nil, Piece{Kind: PieceText, Text: "mine"})
	c.Delta(nil, Piece{Kind: PieceText, Text: "theirs"})
	end := End{Finish: FinishStop}
	if body := o.Close(nil, end); !bytes.Contains(body, []byte(`"text":"mine"`)) {
		t.Fatalf("original: %s", body)
	}
	if body := c.Close(nil, end); !bytes.Contains(body, []byte(`"text":"theirs"`)) {
		t.Fatalf("clone: %s", body)
	}
}
