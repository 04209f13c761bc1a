package wire

import (
	"io"
	"testing"
)

// benchImage is an 8 MiB image in one GENERATE (9 MEDIA frames).
func benchImage() (*Generate, []MediaChunk) {
	data := seqBytes(8<<20, 3)
	g := mediaGenerate([]MediaItem{mediaItem("image/png", 4096, 4096, data)})
	var chunks []MediaChunk
	for off := 0; off < len(data); off += MediaChunkSize {
		chunks = append(chunks, MediaChunk{Offset: uint32(off), Data: data[off:min(off+MediaChunkSize, len(data))]})
	}
	return g, chunks
}

// BenchmarkSendGenerateMedia: a router writing a GENERATE and its image's
// MEDIA frames (bytes per second of image).
func BenchmarkSendGenerateMedia(b *testing.B) {
	g, _ := benchImage()
	w := NewWriter(io.Discard)
	b.SetBytes(int64(g.Media.Bytes()))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.SendGenerate(1, g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMediaAssembly: an engine decoding the GENERATE, collecting the
// MEDIA frames and checking the image (XXH3-128 of its bytes).
func BenchmarkMediaAssembly(b *testing.B) {
	g, chunks := benchImage()
	p, err := g.AppendPayload(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(g.Media.Bytes()))
	b.ReportAllocs()
	for b.Loop() {
		var d Generate
		if err := d.Decode(p, nil); err != nil {
			b.Fatal(err)
		}
		a, err := NewMediaAssembly(&d, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range chunks {
			if err := a.Add(&chunks[i]); err != nil {
				b.Fatal(err)
			}
		}
		full, err := a.Generate()
		if err == nil {
			err = CheckMedia(full)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
