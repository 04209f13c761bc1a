package sim

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/zeebo/xxh3"
)

// The image of these tests sits at [imageAt, imageAt+imageLen) of a
// 100-token prompt (6 full blocks of 16): it starts in block 1, mid-block.
const imageAt, imageLen = 24, 40

// imagePrompt is the prompt: text ids, the image's placeholder ids, text.
func imagePrompt() []uint32 {
	p := make([]uint32, 100)
	for i := range p {
		p[i] = uint32(1000 + i)
		if i >= imageAt && i < imageAt+imageLen {
			p[i] = 151655 // Qwen2.5-VL's <|image_pad|>
		}
	}
	return p
}

// imageGenerate is a GENERATE of imagePrompt with data as its image.
func imageGenerate(data []byte) *wire.Generate {
	g := generate(imagePrompt(), 2)
	it := wire.MediaItem{ID: xxh3.Hash128(data).Bytes(), MIME: []byte("image/png"), Width: 224, Height: 224, Data: data}
	g.MMItems = wire.MMItemsOf([]wire.MMItem{{Offset: imageAt, Length: imageLen, Hash: it.Key()}})
	g.Media = wire.MediaOf([]wire.MediaItem{it})
	return g
}

// imageHashes are the block hashes a router computes for imagePrompt with
// data as its image.
func imageHashes(t *testing.T, cfg Config, data []byte) []uint64 {
	t.Helper()
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: cfg.Rank.BlockSize, Seed: cfg.Rank.HashSeed, Model: cfg.Rank.Model})
	must(t, err)
	id := xxh3.Hash128(data)
	hs, err := h.Hash(nil, imagePrompt(), &kvstore.Keys{MM: []kvstore.MMItem{{Offset: imageAt, Length: imageLen, Hash: id.Lo}}})
	must(t, err)
	return hs
}

// runImage sends g on stream and returns its cached tokens once every KV
// event of its steps is in (stored collects the hashes they store).
func runImage(t *testing.T, c *wire.Conn, stream uint32, g *wire.Generate, stored map[uint64]bool) uint32 {
	t.Helper()
	must(t, c.SendGenerate(stream, g))
	cached := readImage(t, c, stream, stored)
	// The events of a step may follow its last TOKENS; a LOAD answers
	// behind them.
	must(t, c.Send(0, &wire.LoadRequest{}))
	readImage(t, c, 0, stored)
	return cached
}

// readImage reads until stream's last TOKENS (stream 0: until a LOAD),
// collecting stored hashes, and returns the stream's cached tokens.
func readImage(t *testing.T, c *wire.Conn, stream uint32, stored map[uint64]bool) uint32 {
	t.Helper()
	var cached uint32
	for {
		f, err := c.ReadFrame()
		must(t, err)
		switch {
		case stream == 0 && f.Type == wire.TypeLoad:
			return 0
		case f.Type == wire.TypeKVEvents:
			var m wire.KVEvents
			must(t, wire.DecodeFrame(f, &m, nil))
			for _, ev := range m.Events {
				if ev.Kind == wire.EventStored {
					for _, h := range ev.Hashes.AppendTo(nil) {
						stored[h] = true
					}
				}
			}
		case f.Stream == stream && f.Type == wire.TypeError:
			var e wire.Error
			must(t, wire.DecodeFrame(f, &e, nil))
			t.Fatalf("stream %d: %s %s", stream, e.Code, e.Message)
		case f.Stream == stream && f.Type == wire.TypeTokens:
			var m wire.TokensMsg
			must(t, wire.DecodeFrame(f, &m, nil))
			if m.First() {
				cached = m.CachedTokens
			}
			if m.Last() {
				return cached
			}
		}
	}
}

// TestServerImagesCached: the simulator caches an image's blocks by the
// keys a router hashes: the same text and image again is cached over the
// image (every full block), the same text with another image only up to
// the block where the image starts; its KV events store exactly the
// router's hashes.
func TestServerImagesCached(t *testing.T) {
	var cfg Config
	_, addr := startServer(t, func(c *Config) { cfg = *c })
	c := dialRouter(t, addr, "")
	if c.Peer.Features&wire.FeatureMultimodal == 0 {
		t.Fatal("the simulator does not announce MULTIMODAL")
	}
	cat := bytes.Repeat([]byte("a cat "), 50000) // 300 kB, one MEDIA frame
	dog := bytes.Repeat([]byte("a dog "), 50000)
	stored := map[uint64]bool{}
	if got := runImage(t, c, 1, imageGenerate(cat), stored); got != 0 {
		t.Fatalf("first request cached %d tokens", got)
	}
	if got := runImage(t, c, 3, imageGenerate(cat), stored); got != 96 {
		t.Fatalf("same text, same image: %d tokens cached, want 96 (the 6 full blocks)", got)
	}
	if got := runImage(t, c, 5, imageGenerate(dog), stored); got != 16 {
		t.Fatalf("same text, another image: %d tokens cached, want 16 (up to block 1, where the image starts)", got)
	}
	catHashes, dogHashes := imageHashes(t, cfg, cat), imageHashes(t, cfg, dog)
	for i := range catHashes {
		if !stored[catHashes[i]] || !stored[dogHashes[i]] {
			t.Fatalf("block %d: KV events stored cat %v, dog %v: not the router's hashes", i, stored[catHashes[i]], stored[dogHashes[i]])
		}
	}
	if catHashes[0] != dogHashes[0] || slices.ContainsFunc(catHashes[1:], func(h uint64) bool { return slices.Contains(dogHashes, h) }) {
		t.Fatal("the two images share a block after the one before the image")
	}
}

// TestServerImagesRefused: an image whose bytes are not its id, or whose
// mm item hash is not its id's key, fails with an ERROR naming the item;
// an engine started with --multimodal=false announces no MULTIMODAL and
// refuses images by the feature's name.
func TestServerImagesRefused(t *testing.T) {
	_, addr := startServer(t, nil)
	c := dialRouter(t, addr, "")
	bad := imageGenerate([]byte("png bytes"))
	it := bad.Media.At(0)
	it.Data = []byte("other bytes")
	bad.Media = wire.MediaOf([]wire.MediaItem{it})
	badHash := imageGenerate([]byte("png bytes"))
	badHash.MMItems = wire.MMItemsOf([]wire.MMItem{{Offset: imageAt, Length: imageLen, Hash: 1}})
	for i, tc := range []struct {
		g    *wire.Generate
		want string
	}{{bad, "media item 0: content id"}, {badHash, "mm item 0: hash"}} {
		stream := uint32(1 + 2*i)
		must(t, c.SendGenerate(stream, tc.g))
		_, e := readStream(t, c, stream, map[wire.Type]int{})
		if e == nil || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, tc.want) {
			t.Fatalf("got %+v, want BAD_REQUEST naming %q", e, tc.want)
		}
	}

	_, addr = startServer(t, func(c *Config) { c.NoMultimodal = true })
	c = dialRouter(t, addr, "")
	if c.Peer.Features&wire.FeatureMultimodal != 0 {
		t.Fatal("NoMultimodal: MULTIMODAL announced")
	}
	must(t, c.SendGenerate(1, imageGenerate([]byte("png bytes"))))
	_, e := readStream(t, c, 1, map[wire.Type]int{})
	if e == nil || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, "MULTIMODAL") {
		t.Fatalf("images to an engine without the feature: %+v", e)
	}
}
