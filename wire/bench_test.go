package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func benchGenerate() *Generate {
	return &Generate{RequestID: []byte("chatcmpl-1"), Model: []byte("Qwen/Qwen3-8B"), MaxTokens: 256,
		TopP: 1, DPRank: AnyRank, Prompt: TokensOf(longPrompt(8192))}
}

// benchEvents is a KV_EVENTS batch of 1,024 blocks as an engine emits them:
// chains of 16 stored blocks with a parent, and some removals.
func benchEvents() *KVEvents {
	rng := rand.New(rand.NewPCG(7, 7))
	m := &KVEvents{Seq: 1}
	for blocks := 0; blocks < 1024; blocks += 16 {
		hs := make([]uint64, 16)
		for i := range hs {
			hs[i] = rng.Uint64()
		}
		kind := EventStored
		if blocks%128 == 0 {
			kind = EventRemoved
		}
		m.Events = append(m.Events, Event{Kind: kind, HasParent: kind == EventStored, Parent: rng.Uint64(), Hashes: HashesOf(hs)})
	}
	return m
}

func BenchmarkGenerateEncode8192(b *testing.B) {
	g := benchGenerate()
	buf, _ := AppendFrame(nil, 1, g)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendFrame(buf[:0], 1, g)
	}
}

func BenchmarkGenerateDecode8192(b *testing.B) {
	frame, _ := AppendFrame(nil, 1, benchGenerate())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var g Generate
	for b.Loop() {
		_, payload, _, err := SplitFrame(frame, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Decode(payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateDecodeCopy8192 decodes and copies the ids out into a
// []uint32, as a consumer that needs its own slice does.
func BenchmarkGenerateDecodeCopy8192(b *testing.B) {
	frame, _ := AppendFrame(nil, 1, benchGenerate())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var g Generate
	ids := make([]uint32, 0, 8192)
	for b.Loop() {
		_, payload, _, _ := SplitFrame(frame, nil)
		if err := g.Decode(payload, nil); err != nil {
			b.Fatal(err)
		}
		ids = g.Prompt.AppendTo(ids[:0])
	}
}

func BenchmarkKVEvents1024(b *testing.B) {
	ev := benchEvents()
	for _, codec := range []Codec{CodecNone, CodecS2, CodecZstd} {
		name := map[Codec]string{CodecNone: "none", CodecS2: "s2", CodecZstd: "zstd"}[codec]
		var scratch []byte
		frame, err := AppendFrameCompressed(nil, 0, ev, codec, &scratch)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := ev.AppendPayload(nil)
		b.Run("encode/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			buf := make([]byte, 0, len(frame)*2)
			for b.Loop() {
				buf, _ = AppendFrameCompressed(buf[:0], 0, ev, codec, &scratch)
			}
			b.ReportMetric(float64(len(frame))/float64(len(raw)+HeaderSize), "ratio")
		})
		b.Run("decode/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			var m KVEvents
			var out []byte
			for b.Loop() {
				h, payload, _, err := SplitFrame(frame, nil)
				if err != nil {
					b.Fatal(err)
				}
				var p []byte
				p, out, err = Decompress(h, payload, nil, out)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Decode(p, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHashesAppendTo copies a 512-block STORED event's hashes (a long
// prompt's prefill) out of a decoded frame, as the router does for its index.
func BenchmarkHashesAppendTo(b *testing.B) {
	hs := make([]uint64, 512)
	for i := range hs {
		hs[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	v, dst := HashesOf(hs), make([]uint64, 0, len(hs))
	b.SetBytes(8 * int64(len(hs)))
	for b.Loop() {
		dst = v.AppendTo(dst[:0])
	}
}

// BenchmarkSnapshotCompression measures a snapshot chunk of 32,768 blocks in
// long chains, where parents repeat the previous hash: what compression can win.
func BenchmarkSnapshotCompression(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	s := &Snapshot{Last: true}
	for range 256 {
		hs := make([]uint64, 128)
		for i := range hs {
			hs[i] = rng.Uint64()
		}
		s.Events = append(s.Events, Event{Kind: EventStored, Hashes: HashesOf(hs)})
	}
	raw, _ := s.AppendPayload(nil)
	for _, codec := range []Codec{CodecS2, CodecZstd} {
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			var scratch, frame []byte
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				frame, _ = AppendFrameCompressed(frame[:0], 0, s, codec, &scratch)
			}
			b.ReportMetric(float64(len(frame))/float64(len(raw)), "ratio")
		})
	}
}

func BenchmarkReaderTokensFrames(b *testing.B) {
	frame, _ := AppendFrame(nil, 3, &TokensMsg{Tokens: TokensOf([]uint32{1, 2, 3, 4})})
	src := make([]byte, 0, len(frame)*4096)
	for range 4096 {
		src = append(src, frame...)
	}
	rd := &loopReader{data: src}
	r := NewReader(rd, nil)
	var m TokensMsg
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Decode(f.Payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// loopReader serves data forever in 64 KiB reads.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), 64<<10)], l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}
