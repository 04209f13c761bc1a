package tokenize

import "testing"

// shortPrompts are prompts of the length most completions carry: the
// 12-token prompt proxybench sends, and a paragraph of a chat turn.
var shortPrompts = []struct{ name, text string }{
	{"proxybench", "Hello, how are you today? Tell me about routers."},
	{"paragraph", "A router in front of a fleet of inference engines sees every request before any engine does. " +
		"It tokenizes the prompt, hashes its blocks, asks the index which engines hold them, and picks the one " +
		"that will answer first. Each of those steps costs microseconds; at 30,000 requests a second they add up."},
}

// BenchmarkEncodeShort encodes short prompts with the product
// configuration (the built-in tokenizer, segment cache off, piece cache
// warm): what a request's tokenization costs when its text is new but its
// words are common. cpu-ns/op (the process's CPU time over b.N) moves
// less than ns/op on a shared machine.
func BenchmarkEncodeShort(b *testing.B) {
	tok := uncachedBuiltin(b)
	for _, p := range shortPrompts {
		b.Run(p.name, func(b *testing.B) {
			dst := tok.Encode(nil, p.text, false)
			b.SetBytes(int64(len(p.text)))
			b.ReportAllocs()
			c := startCPU()
			for b.Loop() {
				dst = tok.Encode(dst[:0], p.text, false)
			}
			c.report(b)
		})
	}
}
