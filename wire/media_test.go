package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// mediaItem is an item over data with its true content id.
func mediaItem(mime string, w, h uint32, data []byte) MediaItem {
	return MediaItem{ID: xxh3.Hash128(data).Bytes(), MIME: []byte(mime), Width: w, Height: h, Data: data}
}

// goldenMedia are the two items of the media vectors. Their bytes stand in
// for images (the wire never decodes them): a PNG and a JPEG signature
// followed by counting bytes.
func goldenMedia() []MediaItem {
	png := append([]byte("\x89PNG\r\n\x1a\n"), seqBytes(16, 0x10)...)
	jpeg := append([]byte("\xff\xd8\xff\xe0"), seqBytes(20, 0x40)...)
	return []MediaItem{mediaItem("image/png", 640, 480, png), mediaItem("image/jpeg", 32, 32, jpeg)}
}

func seqBytes(n int, from byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = from + byte(i)
	}
	return b
}

// mediaGenerate is a GENERATE of prompt length 16 whose mm items [2,6) and
// [9,13) are the media items.
func mediaGenerate(items []MediaItem) *Generate {
	mm := make([]MMItem, len(items))
	for i := range items {
		mm[i] = MMItem{Offset: uint32(2 + 7*i), Length: 4, Hash: items[i].Key()}
	}
	return &Generate{RequestID: []byte("r11"), Model: []byte("Qwen/Qwen2.5-VL-7B-Instruct"), MaxTokens: 16, TopP: 1, Flags: GenMedia,
		DPRank: AnyRank, MMItems: MMItemsOf(mm), Media: MediaOf(items), Prompt: TokensOf(seqTokens(16))}
}

func seqTokens(n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(100 + i)
	}
	return t
}

func mediaGoldenCases() []goldenCase {
	items := goldenMedia()
	jpeg := items[1].Data
	return []goldenCase{
		{name: "generate_media", about: "GENERATE with two images (flag MEDIA, only to an engine whose WELCOME had MULTIMODAL): mm items [2,6) and [9,13), each hash the low 64 bits of its media's content id (XXH3-128 of the bytes); the bytes follow in media_item0, media_item1_part0 and media_item1_part1",
			stream: 11, msg: mediaGenerate(items)},
		{name: "media_item0", about: "MEDIA on stream 11: all 24 bytes of item 0", stream: 11,
			msg: &MediaChunk{Item: 0, Offset: 0, Data: items[0].Data}},
		{name: "media_item1_part0", about: "MEDIA on stream 11: bytes [0,10) of item 1", stream: 11,
			msg: &MediaChunk{Item: 1, Offset: 0, Data: jpeg[:10]}},
		{name: "media_item1_part1", about: "MEDIA on stream 11: bytes [10,24) of item 1, its last: the GENERATE can run", stream: 11,
			msg: &MediaChunk{Item: 1, Offset: 10, Data: jpeg[10:]}},
	}
}

func FuzzMedia(f *testing.F) { fuzzMessage(f, TypeMedia) }

// FuzzMediaAssembly feeds an assembly chunks cut from the fuzz input
// (item, offset and length from each 3 bytes): it never panics, refuses
// with ErrBadValue, and when it completes it holds exactly the items' bytes.
func FuzzMediaAssembly(f *testing.F) {
	f.Add([]byte{0, 0, 24, 1, 0, 10, 1, 10, 14})
	f.Add([]byte{0, 0, 5, 0, 5, 19, 1, 0, 24})
	f.Add([]byte{1, 0, 1})
	items := goldenMedia()
	f.Fuzz(func(t *testing.T, cuts []byte) {
		a, err := NewMediaAssembly(decodeGenerate(t, mediaGenerate(items)), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+3 <= len(cuts); i += 3 {
			item, off, n := int(cuts[i]%3), int(cuts[i+1]), int(cuts[i+2])
			src := []byte("0123456789012345678901234567890123456789")
			if item < 2 && off < len(items[item].Data) {
				src = items[item].Data[off:]
			}
			if n = min(n, len(src)); n == 0 {
				continue
			}
			if err := a.Add(&MediaChunk{Item: uint16(item), Offset: uint32(off), Data: src[:n]}); err != nil {
				if !errors.Is(err, ErrBadValue) {
					t.Fatalf("error without ErrBadValue: %v", err)
				}
				return
			}
		}
		if !a.Done() {
			return
		}
		g, err := a.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckMedia(g); err != nil {
			t.Fatalf("assembled media fails its check: %v", err)
		}
	})
}

// decodeGenerate encodes g and decodes it back, as an engine receives it.
func decodeGenerate(t testing.TB, g *Generate) *Generate {
	t.Helper()
	p, err := g.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var d Generate
	if err := d.Decode(p, nil); err != nil {
		t.Fatal(err)
	}
	return &d
}

// TestSendGenerateMedia: a GENERATE with an image of several chunks and a
// small one leaves SendGenerate as the GENERATE then its MEDIA frames in
// order, and an assembly fed those frames rebuilds both images, which pass
// CheckMedia.
func TestSendGenerateMedia(t *testing.T) {
	big := seqBytes(2*MediaChunkSize+12345, 7)
	items := []MediaItem{mediaItem("image/webp", 4000, 3000, big), goldenMedia()[1]}
	var buf bytes.Buffer
	if err := NewWriter(&buf).SendGenerate(5, mediaGenerate(items)); err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	r := NewReader(&buf, &lim)
	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeGenerate || f.Stream != 5 {
		t.Fatalf("first frame %v stream %d, err %v", f.Type, f.Stream, err)
	}
	var g Generate
	if err := DecodeFrame(f, &g, &lim); err != nil {
		t.Fatal(err)
	}
	if g.Flags&GenMedia == 0 || g.Media.Len() != 2 || g.Media.Size(0) != len(big) || g.Media.At(0).Data != nil {
		t.Fatalf("decoded GENERATE: flags %#x, %d media, size %d", g.Flags, g.Media.Len(), g.Media.Size(0))
	}
	a, err := NewMediaAssembly(&g, &lim)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for !a.Done() {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("after %d chunks: %v", chunks, err)
		}
		var ch MediaChunk
		if err := DecodeFrame(f, &ch, &lim); err != nil || f.Stream != 5 {
			t.Fatalf("chunk %d on stream %d: %v", chunks, f.Stream, err)
		}
		if err := a.Add(&ch); err != nil {
			t.Fatal(err)
		}
		chunks++
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last chunk: %v, want EOF", err)
	}
	if chunks != 4 { // the big image in 3, the small one in 1
		t.Fatalf("%d chunks, want 4", chunks)
	}
	got, err := a.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckMedia(got); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		it := got.Media.At(i)
		if !bytes.Equal(it.Data, items[i].Data) || it.ID != items[i].ID || string(it.MIME) != string(items[i].MIME) || it.Width != items[i].Width {
			t.Fatalf("item %d differs after assembly", i)
		}
	}
	if got.Prompt.Len() != 16 || string(got.Model) != "Qwen/Qwen2.5-VL-7B-Instruct" {
		t.Fatal("the GENERATE's other fields did not survive the copy")
	}
}

func TestMediaAssemblyRefuses(t *testing.T) {
	items := goldenMedia()
	for _, c := range []struct {
		name   string
		chunks []MediaChunk
	}{
		{"item out of order", []MediaChunk{{Item: 1, Data: items[1].Data}}},
		{"gap", []MediaChunk{{Item: 0, Data: items[0].Data[:4]}, {Item: 0, Offset: 5, Data: items[0].Data[5:]}}},
		{"repeated", []MediaChunk{{Item: 0, Data: items[0].Data[:4]}, {Item: 0, Data: items[0].Data[:4]}}},
		{"past the size", []MediaChunk{{Item: 0, Data: append(append([]byte(nil), items[0].Data...), 0)}}},
		{"after the last", []MediaChunk{{Item: 0, Data: items[0].Data}, {Item: 1, Data: items[1].Data}, {Item: 1, Offset: 24, Data: []byte{1}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := NewMediaAssembly(decodeGenerate(t, mediaGenerate(items)), nil)
			if err != nil {
				t.Fatal(err)
			}
			var last error
			for i := range c.chunks {
				if last = a.Add(&c.chunks[i]); last != nil {
					break
				}
			}
			if !errors.Is(last, ErrBadValue) {
				t.Fatalf("got %v, want ErrBadValue", last)
			}
			if code, ok := RequestCode(last); !ok || code != CodeBadRequest {
				t.Fatalf("code %v %v, want BAD_REQUEST", code, ok)
			}
		})
	}
	a, _ := NewMediaAssembly(decodeGenerate(t, mediaGenerate(items)), nil)
	if _, err := a.Generate(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Generate before the bytes: %v", err)
	}
	if _, err := NewMediaAssembly(decodeGenerate(t, &Generate{TopP: 1, Prompt: TokensOf([]uint32{1})}), nil); err == nil {
		t.Fatal("assembly of a GENERATE without media")
	}
}

// assembled returns g as an engine holds it after all its MEDIA frames.
func assembled(t *testing.T, g *Generate) *Generate {
	t.Helper()
	a, err := NewMediaAssembly(decodeGenerate(t, g), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Media.Len() {
		if err := a.Add(&MediaChunk{Item: uint16(i), Data: g.Media.At(i).Data}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := a.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckMedia: the engine's checks name the item whose bytes, id or
// hash do not agree.
func TestCheckMedia(t *testing.T) {
	if err := CheckMedia(assembled(t, mediaGenerate(goldenMedia()))); err != nil {
		t.Fatalf("good media: %v", err)
	}
	badBytes := goldenMedia()
	badBytes[1].Data = append([]byte(nil), badBytes[1].Data...)
	badBytes[1].Data[3] ^= 1 // the id is of the old bytes
	badHash := mediaGenerate(goldenMedia())
	mm := []MMItem{badHash.MMItems.At(0), badHash.MMItems.At(1)}
	mm[0].Hash++
	badHash.MMItems = MMItemsOf(mm)
	noMedia := mediaGenerate(goldenMedia())
	noMedia.Media, noMedia.Flags = Media{}, 0
	for _, c := range []struct {
		name, want string
		g          *Generate
	}{
		{"bytes not of the id", "media item 1: content id", assembled(t, mediaGenerate(badBytes))},
		{"hash not the id's key", "mm item 0: hash", assembled(t, badHash)},
		{"mm items without media", "2 mm items and 0 media items", decodeGenerate(t, noMedia)},
	} {
		err := CheckMedia(c.g)
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadValue naming %q", c.name, err, c.want)
		}
	}
}

// TestGenerateMediaRefused: what a receiver refuses in the media section
// and the mm items, with the code it answers, and what CheckLimits and
// CheckFeatures tell a sender first.
func TestGenerateMediaRefused(t *testing.T) {
	small := DefaultLimits()
	small.MaxMediaItemBytes, small.MaxMediaBytes = 24, 40
	for _, c := range []struct {
		name string
		lim  *Limits
		edit func(g *Generate)
		want error
	}{
		{"more media than mm items", nil, func(g *Generate) { g.Media = MediaOf(append(goldenMedia(), goldenMedia()[0])) }, ErrBadValue},
		{"zero width", nil, func(g *Generate) { it := goldenMedia(); it[0].Width = 0; g.Media = MediaOf(it) }, ErrBadValue},
		{"bad mime", nil, func(g *Generate) { it := goldenMedia(); it[1].MIME = []byte("image/ png"); g.Media = MediaOf(it) }, ErrBadValue},
		{"empty item", nil, func(g *Generate) { it := goldenMedia(); it[1].Data = nil; g.Media = MediaOf(it) }, ErrBadValue},
		{"overlapping mm items", nil, func(g *Generate) {
			g.MMItems = MMItemsOf([]MMItem{{Offset: 2, Length: 8, Hash: 1}, {Offset: 9, Length: 4, Hash: 2}})
		}, ErrBadValue},
		{"item over its limit", &small, func(g *Generate) { it := goldenMedia(); it[0].Data = seqBytes(25, 0); g.Media = MediaOf(it) }, ErrLimit},
		{"request over its limit", &small, func(*Generate) {}, ErrLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := mediaGenerate(goldenMedia())
			c.edit(g)
			if err := g.CheckLimits(c.lim); !errors.Is(err, c.want) {
				t.Errorf("CheckLimits: %v, want %v", err, c.want)
			}
			p, err := g.AppendPayload(nil)
			if err != nil {
				if c.name == "empty item" {
					return // a size the encoder writes as is; the receiver's refusal is the zero size
				}
				t.Fatal(err)
			}
			var d Generate
			err = d.Decode(p, c.lim)
			if !errors.Is(err, c.want) {
				t.Fatalf("decoding: %v, want %v", err, c.want)
			}
			if _, ok := RequestCode(err); !ok {
				t.Fatalf("%v ends the connection, want a stream error", err)
			}
		})
	}
	g := mediaGenerate(goldenMedia())
	if err := g.CheckFeatures(FeatureSnapshot); !errors.Is(err, ErrUnexpectedFrame) || !strings.Contains(err.Error(), "MULTIMODAL") {
		t.Fatalf("images to an engine without the feature: %v", err)
	}
	if err := g.CheckFeatures(FeatureMultimodal); err != nil {
		t.Fatal(err)
	}
	if err := (&Generate{}).CheckFeatures(0); err != nil {
		t.Fatal(err)
	}
}

// TestMediaDecodeNoAllocs: the media section and MEDIA frames decode as
// views.
func TestMediaDecodeNoAllocs(t *testing.T) {
	for _, m := range []Message{mediaGenerate(goldenMedia()), &MediaChunk{Item: 1, Offset: 7, Data: seqBytes(MediaChunkSize, 0)}} {
		p, err := m.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		into := NewMessage(m.Type())
		if a := testing.AllocsPerRun(100, func() {
			if err := into.Decode(p, nil); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("decoding %s: %v allocs", m.Type(), a)
		}
	}
}

// TestQueueGenerateWaitsForFlush: QueueGenerate writes nothing for a
// GENERATE without media; two of them leave in the one write of the next
// Flush, in order, and decode back.
func TestQueueGenerateWaitsForFlush(t *testing.T) {
	var cw writeCounter
	w := NewWriter(&cw)
	g := &Generate{RequestID: []byte("r"), Model: []byte("m"), MaxTokens: 16, TopP: 1, DPRank: AnyRank, Prompt: TokensOf(seqTokens(16))}
	for _, stream := range []uint32{3, 5} {
		if err := w.QueueGenerate(stream, g); err != nil {
			t.Fatal(err)
		}
	}
	if cw.writes != 0 {
		t.Fatalf("%d writes before Flush, want 0", cw.writes)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if cw.writes != 1 {
		t.Fatalf("%d writes for two queued GENERATEs, want 1", cw.writes)
	}
	lim := DefaultLimits()
	r := NewReader(&cw.buf, &lim)
	for _, stream := range []uint32{3, 5} {
		f, err := r.ReadFrame()
		if err != nil || f.Type != TypeGenerate || f.Stream != stream {
			t.Fatalf("frame %v on stream %d, err %v; want GENERATE on %d", f.Type, f.Stream, err, stream)
		}
		var g Generate
		if err := DecodeFrame(f, &g, &lim); err != nil {
			t.Fatal(err)
		}
	}
}

// writeCounter is a bytes.Buffer that counts its writes.
type writeCounter struct {
	buf    bytes.Buffer
	writes int
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.writes++
	return c.buf.Write(p)
}
