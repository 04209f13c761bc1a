package vllm_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// rawHash is a 32-byte vLLM BlockHash (sha256 digest) whose last 8 bytes
// are n.
func rawHash(n uint64) []byte {
	b := make([]byte, 32)
	for i := range 8 {
		b[31-i] = byte(n >> (8 * i))
	}
	b[0] = 0xab
	return b
}

func hashesOf(out []wire.Event, tier wire.Tier, kind wire.EventKind) []uint64 {
	var hs []uint64
	for _, e := range out {
		if e.Tier == tier && e.Kind == kind {
			hs = append(hs, e.Hashes.AppendTo(nil)...)
		}
	}
	return hs
}

// TestOffloadedBlocks: the OffloadingConnector's CPU events (raw-bytes
// hashes, no tokens, no parent, block_size 0 or the real size) index the
// GPU blocks already translated in the CPU tier, whichever hash form the
// GPU events used; spans of several GPU blocks, removals, unknown copies
// and an undecodable event in the same batch.
func TestOffloadedBlocks(t *testing.T) {
	h := hasher(t)
	p := prompt(16) // 4 blocks of 4
	want, _ := h.Hash(nil, p, nil)
	for _, form := range []struct {
		name string
		gpu  func(n uint64) vllm.Hash
	}{
		{"bytes", func(n uint64) vllm.Hash { return vllmtest.BytesHash(rawHash(n)) }},
		{"int", func(n uint64) vllm.Hash { return vllmtest.IntHash(n) }}, // VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
	} {
		t.Run(form.name, func(t *testing.T) {
			tr := vllm.NewTranslator(h, nil)
			gpu := []vllm.Hash{form.gpu(1), form.gpu(2), form.gpu(3), form.gpu(4)}
			cpu := func(n uint64) vllm.Hash { return vllmtest.BytesHash(rawHash(n)) }
			out := tr.Apply(0, []vllm.Event{
				{Kind: vllm.BlockStored, BlockHashes: gpu, TokenIDs: p, BlockSize: 4, Medium: "GPU"},
				// block_size 0: one GPU block per copy.
				{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{cpu(1)}, Medium: "CPU"},
				{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{cpu(99)}, Medium: "CPU"},
				{Kind: vllm.BlockStored, Invalid: "bad"},
				// block_size 8: the copy named by block 4 covers blocks 3 and 4.
				{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{cpu(4)}, BlockSize: 8, Medium: "CPU"},
			})
			if got := hashesOf(out, wire.TierGPU, wire.EventStored); !slices.Equal(got, want) {
				t.Fatalf("GPU %x, want %x", got, want)
			}
			if got := hashesOf(out, wire.TierCPU, wire.EventStored); !slices.Equal(got, []uint64{want[0], want[2], want[3]}) {
				t.Fatalf("CPU %x, want blocks 0, 2, 3 of %x", got, want)
			}
			if cpuEv := out[len(out)-1]; !cpuEv.HasParent || cpuEv.Parent != want[1] {
				t.Fatalf("CPU span parent %x (has %v), want %x", cpuEv.Parent, cpuEv.HasParent, want[1])
			}
			if s := tr.Skipped(); s.UnknownOffload != 1 || s.Undecodable != 1 {
				t.Fatalf("skipped %+v", s)
			}
			// With the offloaded block size configured, a block_size 0
			// copy spans that many GPU blocks too.
			tr2 := vllm.NewTranslator(h, nil)
			tr2.OffloadBlockSize = 8
			out2 := tr2.Apply(0, []vllm.Event{{Kind: vllm.BlockStored, BlockHashes: gpu, TokenIDs: p, BlockSize: 4},
				{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{cpu(2)}, Medium: "CPU"}})
			if got := hashesOf(out2, wire.TierCPU, wire.EventStored); !slices.Equal(got, want[:2]) {
				t.Fatalf("configured span: CPU %x, want %x", got, want[:2])
			}
			// The GPU evicts blocks 0 and 3: their CPU copies stay known.
			tr.Apply(0, []vllm.Event{{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{gpu[0], gpu[3]}, Medium: "GPU"}})
			if n := len(tr.Snapshot(0)); n != 4+3-2 {
				t.Fatalf("snapshot has %d entries, want 5", n)
			}
			// The CPU evicts the span: both of its blocks leave the CPU tier.
			out = tr.Apply(0, []vllm.Event{{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{cpu(4)}, Medium: "CPU"}})
			if got := hashesOf(out, wire.TierCPU, wire.EventRemoved); !slices.Equal(got, []uint64{want[2], want[3]}) {
				t.Fatalf("CPU removal %x, want %x", got, want[2:])
			}
			if tr.Blocks(0) != 3 {
				t.Fatalf("%d blocks left, want 3 (0 on CPU, 1 and 2 on GPU)", tr.Blocks(0))
			}
		})
	}
}

// TestLoRAExtraKeys: a block whose extra_keys carry only its adapter
// (current vLLM: the name; older: the id) is indexed under kvgate's hash
// for that adapter; a block with other keys, and every later block of its
// event, is skipped and counted by reason.
func TestLoRAExtraKeys(t *testing.T) {
	h := hasher(t)
	p := prompt(12)
	tr := vllm.NewTranslator(h, []vllm.LoRA{{Name: "sql", VLLMID: 9, WireID: 3}})
	wantLoRA, _ := h.Hash(nil, p, &kvstore.Keys{LoRAID: 3})
	L := vllm.ExtraLoRA
	out := tr.Apply(0, []vllm.Event{{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"a1", "a2", "a3"}, TokenIDs: p, BlockSize: 4,
		LoRAName: "sql", LoRAID: 9, ExtraKeys: []vllm.Extra{L, L, L}}})
	if len(out) != 1 || out[0].LoRAID != 3 || !slices.Equal(out[0].Hashes.AppendTo(nil), wantLoRA) {
		t.Fatalf("LoRA blocks: %+v", out)
	}
	for _, c := range []struct {
		extra []vllm.Extra
		kept  int
		count func(vllm.Skipped) uint64
	}{
		{[]vllm.Extra{L, L | vllm.ExtraMultimodal, L}, 1, func(s vllm.Skipped) uint64 { return s.Multimodal }},
		{[]vllm.Extra{L | vllm.ExtraCacheSalt, L, L}, 0, func(s vllm.Skipped) uint64 { return s.CacheSalt }},
		{[]vllm.Extra{L, L, L | vllm.ExtraPromptEmbeds}, 2, func(s vllm.Skipped) uint64 { return s.PromptEmbeds }},
		{[]vllm.Extra{vllm.ExtraUnknown, 0, 0}, 0, func(s vllm.Skipped) uint64 { return s.ExtraKeys }},
	} {
		before := c.count(tr.Skipped())
		out := tr.Apply(1, []vllm.Event{{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"b1", "b2", "b3"}, TokenIDs: p, BlockSize: 4,
			LoRAName: "sql", ExtraKeys: c.extra}})
		got := hashesOf(out, wire.TierGPU, wire.EventStored)
		if !slices.Equal(got, wantLoRA[:c.kept]) {
			t.Fatalf("%v: kept %x, want %x", c.extra, got, wantLoRA[:c.kept])
		}
		if n := c.count(tr.Skipped()) - before; n != uint64(3-c.kept) {
			t.Fatalf("%v: counted %d, want %d", c.extra, n, 3-c.kept)
		}
		tr.Apply(1, []vllm.Event{{Kind: vllm.AllBlocksCleared}})
	}
}

// FuzzTranslate: whatever decodes, the translator applies without
// panicking, and every block it reports is in its snapshot.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.hex")
	for _, name := range files {
		f.Add(readHex(f, filepath.Base(name)))
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := vllm.DecodeBatch(raw)
		if err != nil {
			return
		}
		tr := vllm.NewTranslator(h, []vllm.LoRA{{Name: "sql", VLLMID: 1, WireID: 1}})
		tr.Apply(0, b.Events)
		tr.Apply(0, b.Events)
		if n := len(tr.Snapshot(0)); n < tr.Blocks(0) {
			t.Fatalf("snapshot of %d entries for %d blocks", n, tr.Blocks(0))
		}
	})
}

// TestOffloadRefcountRemoteAndMediums: newest vLLM's self-describing
// offload events (tokens and parent, the GPU hash forms) index blocks in
// the lower tier; a hash two chunks announced stays until both are
// removed; a REMOTE block is skipped; "Disk" and "STORAGE" are the disk
// tier.
func TestOffloadRefcountRemoteAndMediums(t *testing.T) {
	h := hasher(t)
	p := prompt(8)
	want, _ := h.Hash(nil, p, nil)
	tr := vllm.NewTranslator(h, nil)
	gpu := []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2)}
	stored := func(medium string) vllm.Event {
		return vllm.Event{Kind: vllm.BlockStored, BlockHashes: gpu, TokenIDs: p, BlockSize: 4, Medium: medium}
	}
	out := tr.Apply(0, []vllm.Event{stored("GPU"), stored("CPU"), stored("CPU"), stored("Disk"), stored("STORAGE")})
	if got := hashesOf(out, wire.TierDisk, wire.EventStored); !slices.Equal(got, append(slices.Clone(want), want...)) {
		t.Fatalf("disk %x", got)
	}
	removed := vllm.Event{Kind: vllm.BlockRemoved, BlockHashes: gpu, Medium: "CPU"}
	if out := tr.Apply(0, []vllm.Event{removed}); len(out) != 0 {
		t.Fatalf("first CPU removal of a twice-announced chunk: %+v", out)
	}
	if out := tr.Apply(0, []vllm.Event{removed}); !slices.Equal(hashesOf(out, wire.TierCPU, wire.EventRemoved), want) {
		t.Fatalf("second CPU removal: %+v", out)
	}
	remote := stored("CPU")
	remote.Locality, remote.BlockHashes = "REMOTE", []vllm.Hash{"r1", "r2"}
	if out := tr.Apply(0, []vllm.Event{remote}); len(out) != 0 || tr.Skipped().Remote != 2 {
		t.Fatalf("remote: %+v, skipped %+v", out, tr.Skipped())
	}
}
