package kvstore

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// traceIndexes builds two indexes from the Mooncake trace in testdata, as
// two replicas of a ring would hold them: the same four engines (two ranks
// each, ids as engines are configured, by URL) serving the first requests
// round-robin, blocks on the GPU tier and, for every third request, the
// CPU tier too. The second replica missed the last requests' events and
// never heard of the fourth engine, so the two differ a little and in one
// engine, as real replicas do between syncs.
func traceIndexes(tb testing.TB) (full, lagging *Index) {
	tb.Helper()
	reqs := loadTrace(tb, 48)
	ids := []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000", "http://gpu-node-17.cluster.local:8000"}
	build := func(engines, requests int) *Index {
		ix := New(Options{})
		var slots [][]Slot
		for _, id := range ids[:engines] {
			s, err := ix.AddEngine(EngineConfig{ID: id, Ranks: 2, Capacity: [NumTiers]uint64{1 << 20, 1 << 20}})
			if err != nil {
				tb.Fatal(err)
			}
			slots = append(slots, s)
		}
		for i, r := range reqs[:requests] {
			e := i % len(ids)
			if e >= engines {
				continue
			}
			evs := []Event{{Kind: Stored, Tier: TierGPU, Hashes: r.hashes}}
			if i%3 == 0 {
				evs = append(evs, Event{Kind: Stored, Tier: TierCPU, Hashes: r.hashes[:len(r.hashes)/2]})
			}
			if err := ix.Apply(slots[e][i/len(ids)%2], evs); err != nil {
				tb.Fatal(err)
			}
		}
		return ix
	}
	return build(len(ids), len(reqs)), build(len(ids)-1, len(reqs)-5)
}

// FuzzUnmarshalDigest: a digest decodes exactly when it is DigestSize
// bytes, and whatever decodes re-encodes to the same bytes, counts the
// blocks its buckets count, and compares with a real digest from 0 to 1,
// symmetrically, and as 1 with itself. Seeds are the digests the package's
// encoder writes for every rank and tier of an index built from the
// Mooncake trace, plus an empty digest and cut or stretched ones.
func FuzzUnmarshalDigest(f *testing.F) {
	full, _ := traceIndexes(f)
	var real []Digest
	for _, id := range []string{"http://10.0.0.1:8000", "http://gpu-node-17.cluster.local:8000"} {
		slots, _ := full.Slots(id)
		for _, s := range slots {
			for t := TierGPU; t <= TierApprox; t++ {
				d, err := full.Digest(s, t)
				if err != nil {
					f.Fatal(err)
				}
				real = append(real, d)
				f.Add(d.AppendBinary(nil))
			}
		}
	}
	enc := real[0].AppendBinary(nil)
	f.Add(enc[:DigestSize-1])
	f.Add(append(enc, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := UnmarshalDigest(b)
		if ok != (len(b) == DigestSize) {
			t.Fatalf("%d bytes: ok %v", len(b), ok)
		}
		if !ok {
			if d != (Digest{}) {
				t.Fatal("a refused digest is not the zero digest")
			}
			return
		}
		if again := d.AppendBinary(nil); !bytes.Equal(again, b) {
			t.Fatal("re-encoding differs")
		}
		var total uint64
		for _, c := range d.Count {
			total += uint64(c)
		}
		if total != d.Total {
			t.Fatalf("Total %d, buckets count %d", d.Total, total)
		}
		if s := Similarity(&d, &d); s != 1 {
			t.Fatalf("similarity with itself %v", s)
		}
		for i := range real {
			s, r := Similarity(&d, &real[i]), Similarity(&real[i], &d)
			if !(s >= 0 && s <= 1) || s != r {
				t.Fatalf("similarity to a real digest %v, back %v", s, r)
			}
		}
	})
}

// FuzzEngineDigests: peers' encodings come from the network, so any pair
// of byte strings compares without panicking, from 0 to 1 and the same
// either way round and every time; a malformed one compares as 0 with
// anything, a well-formed one as 1 with itself. What parses is canonical:
// re-encoding it gives the input back. Seeds are AppendEngineDigests of two
// replicas' indexes built from the Mooncake trace, an empty index, and
// those encodings cut short or with an id out of order.
func FuzzEngineDigests(f *testing.F) {
	full, lagging := traceIndexes(f)
	a, b := full.AppendEngineDigests(nil), lagging.AppendEngineDigests(nil)
	empty := New(Options{}).AppendEngineDigests(nil)
	entry := 2 + len("http://10.0.0.1:8000") + DigestSize
	swapped := append(append(append([]byte(nil), a[entry:2*entry]...), a[:entry]...), a[2*entry:]...)
	for _, p := range [][2][]byte{{a, b}, {a, a}, {b, empty}, {a, a[:len(a)-1]}, {a[:entry], a[entry : 2*entry]}, {swapped, a}, {a[:1], empty}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, x, y []byte) {
		s := EngineDigestsSimilarity(x, y)
		if !(s >= 0 && s <= 1) {
			t.Fatalf("similarity %v", s)
		}
		if r := EngineDigestsSimilarity(y, x); r != s {
			t.Fatalf("similarity %v one way, %v the other", s, r)
		}
		if again := EngineDigestsSimilarity(x, y); again != s {
			t.Fatalf("similarity %v, then %v", s, again)
		}
		for _, in := range [][]byte{x, y} {
			digests, ok := parseEngineDigests(in)
			self := EngineDigestsSimilarity(in, in)
			if !ok {
				if s != 0 || self != 0 {
					t.Fatalf("malformed encoding compares as %v, %v with itself", s, self)
				}
				continue
			}
			if self != 1 {
				t.Fatalf("well-formed encoding compares as %v with itself", self)
			}
			if again := appendParsed(nil, digests); !bytes.Equal(again, in) {
				t.Fatalf("re-encoding what parsed differs:\n%x\n%x", again, in)
			}
		}
	})
}

// appendParsed re-encodes parsed engine digests as AppendEngineDigests
// lays them out.
func appendParsed(b []byte, ds []engineDigest) []byte {
	for _, e := range ds {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.id)))
		b = append(b, e.id...)
		b = e.digest.AppendBinary(b)
	}
	return b
}
