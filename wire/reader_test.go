package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader returns its data in pieces of the given sizes, cycling.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.sizes[r.i%len(r.sizes)], len(p), len(r.data))
	r.i++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	var got []string
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		m := NewMessage(f.Type)
		if err := DecodeFrame(f, m, nil); err != nil {
			t.Fatalf("decoding %s: %v", f.Type, err)
		}
		got = append(got, dump(m))
	}
}

// TestReaderEverySplit reads each golden frame split at every byte boundary.
func TestReaderEverySplit(t *testing.T) {
	for _, c := range goldenCases() {
		frame := encodeGolden(t, c)
		for split := 1; split < len(frame); split++ {
			r := NewReader(&chunkReader{data: frame, sizes: []int{split, len(frame)}}, nil)
			got := readAll(t, r)
			if len(got) != 1 || got[0] != dump(c.msg) {
				t.Fatalf("%s split at %d: got %v", c.name, split, got)
			}
		}
	}
}

// TestReaderStream reads many frames delivered in random pieces.
func TestReaderStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var want []string
	cases := goldenCases()
	for range 500 {
		c := cases[rng.IntN(len(cases))]
		stream = append(stream, encodeGolden(t, c)...)
		want = append(want, dump(c.msg))
	}
	sizes := make([]int, 64)
	for i := range sizes {
		sizes[i] = 1 + rng.IntN(300)
	}
	got := readAll(t, NewReader(&chunkReader{data: stream, sizes: sizes}, nil))
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frame %d differs", i)
		}
	}
}

func TestReaderLargeFrameGrowsWithData(t *testing.T) {
	ids := make([]uint32, 1<<20) // 4 MiB of tokens
	for i := range ids {
		ids[i] = uint32(i)
	}
	g := &Generate{Model: []byte("m"), TopP: 1, Prompt: TokensOf(ids)}
	frame, err := AppendFrame(nil, 1, g)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(&chunkReader{data: frame, sizes: []int{7919}}, nil)
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var got Generate
	if err := DecodeFrame(f, &got, nil); err != nil {
		t.Fatal(err)
	}
	if !got.Prompt.Equal(g.Prompt) {
		t.Fatal("prompt differs")
	}
}

// TestReaderHeaderAloneAllocatesLittle: a header announcing a 16 MiB frame
// followed by EOF must not make the reader allocate 16 MiB.
func TestReaderHeaderAloneAllocatesLittle(t *testing.T) {
	hdr := AppendHeader(nil, TypeGenerate, 0, 1, DefaultMaxFrameSize)
	r := NewReader(bytes.NewReader(hdr), nil)
	_, err := r.ReadFrame()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want ErrUnexpectedEOF", err)
	}
	if len(r.buf) > readerInitialSize {
		t.Fatalf("reader grew to %d bytes for a frame never sent", len(r.buf))
	}
}

func TestReaderErrors(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxFrameSize = 4096
	big := AppendHeader(nil, TypeGenerate, 0, 1, 4097)
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"unknown type", []byte{0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnknownType},
		{"reserved bytes", []byte{byte(TypePing), 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrBadHeader},
		{"undefined flag", []byte{byte(TypePing), 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrBadHeader},
		{"codec on GENERATE", []byte{byte(TypeGenerate), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrBadHeader},
		{"codec 3", []byte{byte(TypeKVEvents), 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrBadHeader},
		{"over MaxFrameSize", big, ErrFrameTooLarge},
		{"s2 garbage", append(AppendHeader(nil, TypeKVEvents, uint8(CodecS2), 0, 4), 0xff, 0xff, 0xff, 0xff), ErrDecompress},
		{"s2 claims too much", append(AppendHeader(nil, TypeKVEvents, uint8(CodecS2), 0, 4), 0xff, 0xff, 0xff, 0x7f), ErrFrameTooLarge},
		{"zstd garbage", append(AppendHeader(nil, TypeSnapshot, uint8(CodecZstd), 0, 4), 1, 2, 3, 4), ErrDecompress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.frame), &lim).ReadFrame()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestZstdBomb: a small zstd payload that expands beyond MaxFrameSize is refused.
func TestZstdBomb(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxFrameSize = 64 << 10
	big := &KVEvents{Events: []Event{{Kind: EventRemoved, Hashes: HashesOf(make([]uint64, 1<<15))}}}
	var scratch []byte
	frame, err := AppendFrameCompressed(nil, 0, big, CodecZstd, &scratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) > lim.MaxFrameSize {
		t.Fatalf("compressed frame %d bytes, want a small one", len(frame))
	}
	_, err = NewReader(bytes.NewReader(frame), &lim).ReadFrame()
	if !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrDecompress) {
		t.Fatalf("got %v, want a refusal", err)
	}
}
