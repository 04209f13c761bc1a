package tokenize

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// decodeByMaps is byte-level Decode as it was before the byte table: the
// added-token map, then the spelling. The table must give the same bytes.
func decodeByMaps(t *Tokenizer, dst []byte, ids []uint32, skipSpecial bool) []byte {
	for _, id := range ids {
		if a, ok := t.added[id]; ok {
			if !(skipSpecial && a.Special) {
				dst = append(dst, a.Content...)
			}
			continue
		}
		if int(id) < len(t.spelling) {
			dst = append(dst, t.spelling[id]...)
		}
	}
	return dst
}

// TestByteTableEveryID decodes every id of the built-in byte-level
// vocabulary, and ids past it, both ways, and checks that exactly the ids
// whose bytes are valid UTF-8 by themselves are marked whole.
func TestByteTableEveryID(t *testing.T) {
	tok := builtin(t)
	long, broken := 0, 0
	for id := uint32(0); id < uint32(tok.VocabSize())+8; id++ {
		for _, skip := range []bool{false, true} {
			got := tok.Decode(nil, []uint32{id}, skip)
			if want := decodeByMaps(tok, nil, []uint32{id}, skip); string(got) != string(want) {
				t.Fatalf("id %d (skip special %v): %q, want %q", id, skip, got, want)
			}
			if len(got) > 7 {
				long++
			}
			if _, whole := tok.bytes().appendIDs(nil, []uint32{id}, skip); whole != utf8.Valid(got) {
				t.Fatalf("id %d (skip special %v): %q marked whole %v", id, skip, got, whole)
			}
			if !utf8.Valid(got) {
				broken++
			}
		}
	}
	if broken == 0 {
		t.Fatal("every id is valid UTF-8 by itself: the held-back path went untested")
	}
	if long == 0 {
		t.Fatal("no id longer than an inline entry: the long layout went untested")
	}
}

// TestStreamByteLevelSplits streams random ids, special ones and ids that
// end inside a character among them, in batches of random sizes: the text
// is what the stream gave before the byte table, batch for batch.
func TestStreamByteLevelSplits(t *testing.T) {
	tok := builtin(t)
	var partial []uint32 // ids whose bytes are not valid UTF-8 alone
	for id := range uint32(tok.VocabSize()) {
		if b := tok.Decode(nil, []uint32{id}, false); len(b) > 0 && !utf8.Valid(b) {
			partial = append(partial, id)
		}
	}
	if len(partial) == 0 {
		t.Fatal("no partial-character tokens in the vocabulary")
	}
	special := uint32(tok.VocabSize() - 1)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		ids := make([]uint32, 1+rng.IntN(64))
		for i := range ids {
			switch rng.IntN(4) {
			case 0:
				ids[i] = partial[rng.IntN(len(partial))]
			case 1:
				ids[i] = special - uint32(rng.IntN(20))
			default:
				ids[i] = uint32(rng.IntN(tok.VocabSize()))
			}
		}
		skip := round%2 == 0
		var sizes []int
		for rest := len(ids); rest > 0; {
			n := min(rest, 1+rng.IntN(8))
			sizes = append(sizes, n)
			rest -= n
		}
		s := tok.NewStream(skip)
		var got []byte
		at := 0
		for _, n := range sizes {
			got = s.Next(got, ids[at:at+n])
			at += n
		}
		got = s.Flush(got)
		if want := streamOld(tok, ids, skip, sizes); string(got) != want {
			t.Fatalf("round %d: %q, want %q (ids %v in batches %v)", round, got, want, ids, sizes)
		}
	}
}

// streamOld is the stream as it was before the byte table, in batches of
// the given sizes: Decode into what is held, emit what is ready, as valid
// UTF-8, and at the end what is left.
func streamOld(tok *Tokenizer, ids []uint32, skip bool, sizes []int) string {
	var pending, out []byte
	for _, n := range sizes {
		pending = decodeByMaps(tok, pending, ids[:n], skip)
		ids = ids[n:]
		keep := incompleteTail(pending)
		ready := pending[:len(pending)-keep]
		out = append(out, toValidUTF8(string(ready))...)
		pending = append(pending[:0], pending[len(ready):]...)
	}
	return string(append(out, toValidUTF8(string(pending))...))
}

// BenchmarkStreamNext detokenizes the simulator's kind of output (ids
// drawn over the whole vocabulary, so most miss the cache), 8 ids a call.
func BenchmarkStreamNext(b *testing.B) {
	tok := builtin(b)
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]uint32, 1<<16)
	for i := range ids {
		ids[i] = uint32(rng.IntN(151643))
	}
	s := tok.NewStream(true)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i += 8 {
		at := i % len(ids)
		buf = s.Next(buf[:0], ids[at:at+8])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*8), "ns/token")
}

// TestStreamInvalidUTF8Allocs: text that is not valid UTF-8 (a lone
// continuation byte, as random ids give) comes out with U+FFFD, and
// rewriting it allocates nothing once the stream's arrays have grown.
func TestStreamInvalidUTF8Allocs(t *testing.T) {
	tok := builtin(t)
	lone := -1
	for id := range uint32(151643) {
		if b := tok.Decode(nil, []uint32{id}, true); len(b) == 1 && b[0] >= 0x80 && b[0] <= 0xBF {
			lone = int(id)
			break
		}
	}
	if lone < 0 {
		t.Fatal("no single continuation-byte token in the vocabulary")
	}
	ids := []uint32{uint32(lone), tok.Encode(nil, "a", false)[0]}
	s := tok.NewStream(true)
	var buf []byte
	next := func() { buf = s.Next(buf[:0], ids) }
	next()
	if string(buf) != "\uFFFDa" {
		t.Fatalf("Next gave %q, want %q", buf, "\uFFFDa")
	}
	if n := testing.AllocsPerRun(100, next); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
