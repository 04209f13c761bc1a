package gateway

import (
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// bufSink is a sink that renders into one reused buffer, as output does
// before its socket write.
type bufSink struct {
	enc  api.Encoder
	buf  []byte
	done chan struct{}
}

func (s *bufSink) start(string) error      { return nil }
func (s *bufSink) delta(p api.Piece) error { s.buf = s.enc.Delta(s.buf[:0], p); return nil }
func (s *bufSink) finish(e api.End) error  { s.buf = s.enc.Close(s.buf[:0], e); return nil }
func (s *bufSink) fail(e *api.Error) int   { return e.Status }
func (s *bufSink) gone() int               { return 499 }
func (s *bufSink) goneC() <-chan struct{}  { return s.done }
func (s *bufSink) encoder() api.Encoder    { return s.enc }

// outputPath is a streamed completion's attempt between the engine's
// events and the encoder: detokenize, stop strings (none), parse, encode.
func outputPath(t testing.TB, enc api.Encoder) (func(ev engine.Event), []uint32) {
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Tok: tok}
	sink := &bufSink{enc: enc, done: make(chan struct{})}
	a := &attempt{req: &genRequest{Request: &api.Request{Stream: true}, parser: &api.OutputParser{}}, out: sink,
		detok: tok.NewStream(true), stops: api.NewStopMatcher(nil)}
	ids := tok.Encode(nil, " The router streams every token of the answer to its client, one event at a time.", false)
	return func(ev engine.Event) {
		text, used, _ := a.outputText(g, ev)
		a.generated += used
		if err := a.emit(text, false); err != nil {
			t.Fatal(err)
		}
	}, ids
}

// TestOutputPathAllocs holds the streamed output path (detokenizing,
// parsing, encoding a token's event) to zero allocations.
func TestOutputPathAllocs(t *testing.T) {
	encs := map[string]func() api.Encoder{
		"completions": func() api.Encoder { return &api.OpenAIEncoder{ID: "c", Model: model, Stream: true} },
		"chat":        func() api.Encoder { return &api.OpenAIEncoder{ID: "c", Model: model, Chat: true, Stream: true} },
		"messages":    func() api.Encoder { return &api.AnthropicEncoder{ID: "m", Model: model, Stream: true} },
	}
	for name, mk := range encs {
		t.Run(name, func(t *testing.T) {
			step, ids := outputPath(t, mk())
			i := 0
			next := func() { step(engine.Event{Tokens: ids[i%len(ids) : i%len(ids)+1]}); i++ }
			for range len(ids) { // warm: buffers at their size
				next()
			}
			if n := testing.AllocsPerRun(200, next); n != 0 {
				t.Fatalf("%v allocations per token", n)
			}
		})
	}
}

func BenchmarkOutputPath(b *testing.B) {
	step, ids := outputPath(b, &api.OpenAIEncoder{ID: "c", Model: model, Chat: true, Stream: true})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		step(engine.Event{Tokens: ids[i%len(ids) : i%len(ids)+1]})
		i++
	}
}
