package serve

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve/servetest"
	"github.com/zeebo/xxh3"
)

// mediaFake is a Backend that keeps the media bytes each request came
// with, and the order of its Generate and Cancel calls.
type mediaFake struct {
	fake
	mu     sync.Mutex
	media  map[uint32][][]byte
	events []string // "generate 1", "cancel 1"...
	// hold, when set, makes Generate of stream holdStream close entered
	// and wait until hold is closed.
	hold, entered chan struct{}
	holdStream    uint32
}

func (f *mediaFake) Generate(k Key, g *wire.Generate) error {
	var got [][]byte
	for i := range g.Media.Len() {
		got = append(got, append([]byte(nil), g.Media.At(i).Data...))
	}
	f.mu.Lock()
	hold, entered := f.hold, f.entered
	if k.Stream != f.holdStream {
		hold = nil
	}
	f.mu.Unlock()
	if hold != nil {
		close(entered)
		<-hold
	}
	f.mu.Lock()
	f.media[k.Stream] = got
	f.events = append(f.events, fmt.Sprint("generate ", k.Stream))
	f.mu.Unlock()
	return f.fake.Generate(k, g)
}

func (f *mediaFake) Cancel(k Key) {
	f.mu.Lock()
	f.events = append(f.events, fmt.Sprint("cancel ", k.Stream))
	f.mu.Unlock()
	f.fake.Cancel(k)
}

func (f *mediaFake) eventLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func (f *mediaFake) mediaOf(stream uint32) ([][]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.media[stream]
	return m, ok
}

// startMedia serves a mediaFake engine with features; mods change its
// Config.
func startMedia(t *testing.T, features wire.Feature, mods ...func(*Config)) (*mediaFake, *wire.Conn) {
	t.Helper()
	f := &mediaFake{media: map[uint32][][]byte{}}
	cfg := Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}, Features: features},
		DrainTimeout: 5 * time.Second}
	for _, mod := range mods {
		mod(&cfg)
	}
	s := New(cfg, f)
	f.srv = s
	return f, servetest.Router(t, s)
}

// imageGen is a GENERATE of 32 tokens with one image per item of data,
// placed at 4 + 8i for 4 tokens, with hash the key of its true id.
func imageGen(data ...[]byte) *wire.Generate {
	g := gen()
	g.Prompt = wire.TokensOf(make([]uint32, 32))
	var items []wire.MediaItem
	var mm []wire.MMItem
	for i, d := range data {
		it := wire.MediaItem{ID: xxh3.Hash128(d).Bytes(), MIME: []byte("image/png"), Width: 8, Height: 8, Data: d}
		items = append(items, it)
		mm = append(mm, wire.MMItem{Offset: uint32(4 + 8*i), Length: 4, Hash: it.Key()})
	}
	g.MMItems, g.Media = wire.MMItemsOf(mm), wire.MediaOf(items)
	return g
}

// expectErrorNaming waits for the stream's ERROR and checks its code and
// that its message names what failed.
func expectErrorNaming(t *testing.T, c *wire.Conn, stream uint32, code wire.ErrorCode, want string) {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != wire.TypeError || f.Stream != stream {
			continue
		}
		var e wire.Error
		if err := wire.DecodeFrame(f, &e, nil); err != nil || e.Code != code || !strings.Contains(e.Message, want) {
			t.Fatalf("stream %d: ERROR %v %q (%v), want %v naming %q", stream, e.Code, e.Message, err, code, want)
		}
		return
	}
}

// TestMediaStreams: a GENERATE with images reaches the backend only once
// its MEDIA frames brought every byte, with the bytes; bad images, images
// to an engine without MULTIMODAL, mm items without media and chunks out
// of order fail their stream alone; CANCEL before the last chunk ends it.
func TestMediaStreams(t *testing.T) {
	f, c := startMedia(t, wire.FeatureMultimodal)
	big := bytes.Repeat([]byte("kvgate"), wire.MediaChunkSize/3) // two chunks
	if err := c.SendGenerate(1, imageGen(big, []byte("small image"))); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		m, ok := f.mediaOf(1)
		if !ok {
			return fmt.Errorf("stream 1 did not reach the backend")
		}
		if len(m) != 2 || !bytes.Equal(m[0], big) || string(m[1]) != "small image" {
			return fmt.Errorf("stream 1's media differ: %d items", len(m))
		}
		return nil
	})

	bad := imageGen([]byte("one"), []byte("two"))
	items := []wire.MediaItem{bad.Media.At(0), bad.Media.At(1)}
	items[1].Data = []byte("tw0") // its id is of "two"
	bad.Media = wire.MediaOf(items)
	_ = c.SendGenerate(3, bad)
	expectErrorNaming(t, c, 3, wire.CodeBadRequest, "media item 1: content id")

	noMedia := imageGen([]byte("one"))
	noMedia.Media = wire.Media{}
	_ = c.Send(5, noMedia)
	expectErrorNaming(t, c, 5, wire.CodeBadRequest, "1 mm items and 0 media items")

	// Item 1 before item 0: refused; the later chunks for the stream are ignored.
	g := imageGen([]byte("first"), []byte("second"))
	_ = c.Queue(7, g)
	_ = c.Queue(7, &wire.MediaChunk{Item: 1, Data: []byte("second")})
	_ = c.Send(7, &wire.MediaChunk{Item: 0, Data: []byte("first")})
	expectErrorNaming(t, c, 7, wire.CodeBadRequest, "MEDIA for item 1 while item 0")

	// CANCEL while the media arrive.
	_ = c.Queue(9, imageGen([]byte("never whole")))
	_ = c.Queue(9, &wire.MediaChunk{Item: 0, Data: []byte("never")})
	_ = c.Send(9, &wire.Cancel{})
	expectErrorNaming(t, c, 9, wire.CodeCancelled, "media")

	// The connection went on through all of it.
	if err := c.SendGenerate(11, imageGen([]byte("again"))); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if _, ok := f.mediaOf(11); !ok {
			return fmt.Errorf("stream 11 did not reach the backend")
		}
		return nil
	})
	for _, st := range []uint32{3, 5, 7, 9} {
		if _, ok := f.mediaOf(st); ok {
			t.Errorf("refused stream %d reached the backend", st)
		}
	}
}

// TestMediaWithoutFeature: an engine that did not announce MULTIMODAL
// refuses images by the feature's name, with or without their bytes.
func TestMediaWithoutFeature(t *testing.T) {
	f, c := startMedia(t, 0)
	_ = c.SendGenerate(1, imageGen([]byte("img")))
	expectErrorNaming(t, c, 1, wire.CodeBadRequest, "MULTIMODAL")
	hashOnly := imageGen([]byte("img"))
	hashOnly.Media = wire.Media{}
	_ = c.Send(3, hashOnly)
	expectErrorNaming(t, c, 3, wire.CodeBadRequest, "MULTIMODAL")
	if _, ok := f.mediaOf(1); ok {
		t.Fatal("the backend got images")
	}
}
