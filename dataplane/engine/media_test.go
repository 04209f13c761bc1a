package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/wire"
	"github.com/zeebo/xxh3"
)

// ttImageGenerate is ttGenerate with one image of data over tokens [1, 3).
func ttImageGenerate(data []byte) *wire.Generate {
	g := ttGenerate("m")
	it := wire.MediaItem{ID: xxh3.Hash128(data).Bytes(), MIME: []byte("image/jpeg"), Width: 64, Height: 48, Data: data}
	g.MMItems = wire.MMItemsOf([]wire.MMItem{{Offset: 1, Length: 2, Hash: it.Key()}})
	g.Media = wire.MediaOf([]wire.MediaItem{it})
	return g
}

// TestGenerateSendsMedia: a GENERATE with an image reaches an engine with
// MULTIMODAL as the GENERATE (flag MEDIA) and then the image's bytes in
// MEDIA frames on the same stream, which assemble into an image that
// passes the engine's checks.
func TestGenerateSendsMedia(t *testing.T) {
	hs := ttHandshake("a")
	hs.Features |= wire.FeatureMultimodal
	eng := ttStartEngine(t, hs, nil)
	p, _ := ttPool(t, nil, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)

	data := bytes.Repeat([]byte{0xff, 0xd8, 1, 2, 3}, wire.MediaChunkSize/4) // two chunks
	s, err := e.Generate(ttImageGenerate(data))
	if err != nil {
		t.Fatal(err)
	}
	var g wire.Generate
	f := c.expect(t, &g)
	if f.Stream != s.id || g.Flags&wire.GenMedia == 0 || g.Media.Len() != 1 || g.Media.Size(0) != len(data) {
		t.Fatalf("GENERATE on stream %d (stream %d), flags %#x, %d media", f.Stream, s.id, g.Flags, g.Media.Len())
	}
	a, err := wire.NewMediaAssembly(&g, nil)
	if err != nil {
		t.Fatal(err)
	}
	for !a.Done() {
		var ch wire.MediaChunk
		if f := c.expect(t, &ch); f.Stream != s.id {
			t.Fatalf("MEDIA on stream %d, want %d", f.Stream, s.id)
		}
		if err := a.Add(&ch); err != nil {
			t.Fatal(err)
		}
	}
	full, err := a.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.CheckMedia(full); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(full.Media.At(0).Data, data) {
		t.Fatal("the image's bytes differ at the engine")
	}
}

// TestGenerateRefusesImagesWithoutFeature: an engine that did not
// announce MULTIMODAL never gets images; the error names the feature.
func TestGenerateRefusesImagesWithoutFeature(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("a"), nil)
	p, _ := ttPool(t, nil, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	_, err := e.Generate(ttImageGenerate([]byte("jpeg")))
	if !errors.Is(err, wire.ErrUnexpectedFrame) || !strings.Contains(err.Error(), "MULTIMODAL") {
		t.Fatalf("Generate: %v, want an error naming MULTIMODAL", err)
	}
	// Nothing was sent: the next frame the engine sees is the next GENERATE.
	ttOpen(t, e, c)
}
