package wire

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/")

// goldenCase is one vector: a frame on a stream, compressed with a codec.
type goldenCase struct {
	name   string
	about  string
	stream uint32
	codec  Codec
	msg    Message
}

func goldenCases() []goldenCase {
	nonce := func(b byte) (n [32]byte) {
		for i := range n {
			n[i] = b + byte(i)
		}
		return n
	}
	secret := []byte("s3cret")
	dn, an := nonce(0x10), nonce(0x80)
	events := []Event{
		{Kind: EventStored, Tier: TierGPU, HasParent: false, Hashes: HashesOf([]uint64{0x1111111111111111, 0x2222222222222222})},
		{Kind: EventStored, Tier: TierCPU, Group: 1, HasParent: true, Parent: 0x2222222222222222, LoRAID: 7,
			Hashes: HashesOf([]uint64{0x3333333333333333})},
		{Kind: EventRemoved, Tier: TierGPU, Hashes: HashesOf([]uint64{0x1111111111111111})},
		{Kind: EventCleared, Tier: TierDisk},
	}
	return append([]goldenCase{
		{name: "hello_router", about: "HELLO from a router: versions 1..1, no secret", msg: &Hello{Handshake{
			MinVersion: 1, MaxVersion: 1, Role: RoleRouter, HashScheme: HashXXH3Chained,
			Features: FeatureS2 | FeatureZstd, Nonce: dn, ID: "kvgate-0"}}},
		{name: "welcome_engine_auth", about: "WELCOME from an engine that requires AUTH; proof = HMAC-SHA256(\"s3cret\", \"kvgate wire v1 acceptor\" || hello_nonce(10 11 .. 2f) || welcome_nonce(80 81 .. 9f))",
			msg: &Welcome{Handshake{
				MinVersion: 1, MaxVersion: 1, Role: RoleEngine, HashScheme: HashXXH3Chained,
				Features: FeatureSnapshot | FeatureLoadRequest | FeatureS2, BlockSize: 16,
				MaxBatchedTokens: 8192, HashSeed: 0x6b76676174650001, DPRanks: 2, Nonce: an,
				AuthRequired: true, HasProof: true, Proof: AcceptorProof(secret, &dn, &an),
				ID: "engine-a", Models: []string{"Qwen/Qwen3-8B"}, LoRAs: []LoRA{{ID: 1, Name: "sql-lora"}},
				Tiers: []TierCapacity{{TierGPU, 40000}, {TierCPU, 120000}}}}},
		{name: "welcome_engine_tiers", about: "WELCOME from an engine with CPU and disk tiers and their costs (FeatureTierCosts, sent because the router's HELLO had it): 2,359,296-byte blocks; CPU 10 us + 25 GB/s, disk 100 us + 7.45 GB/s",
			msg: &Welcome{Handshake{
				MinVersion: 1, MaxVersion: 1, Role: RoleEngine, HashScheme: HashXXH3Chained,
				Features: FeatureSnapshot | FeatureLoadRequest | FeatureTierCosts, BlockSize: 16,
				MaxBatchedTokens: 8192, Nonce: an, ID: "engine-t", Models: []string{"Qwen/Qwen3-8B"},
				Tiers: []TierCapacity{{TierGPU, 16384}, {TierCPU, 65536}, {TierDisk, 262144}},
				TierCosts: TierCosts{BlockBytes: 2359296, Links: []TierLink{
					{Tier: TierCPU, LatencyNanos: 10_000, BytesPerSecond: 25_000_000_000},
					{Tier: TierDisk, LatencyNanos: 100_000, BytesPerSecond: 7_450_000_000}}}}}},
		{name: "welcome_engine_context", about: "WELCOME from an engine announcing its context (FeatureContext, sent because the router's HELLO had it): 32,768 tokens, prompt plus output",
			msg: &Welcome{Handshake{
				MinVersion: 1, MaxVersion: 1, Role: RoleEngine, HashScheme: HashXXH3Chained,
				Features: FeatureSnapshot | FeatureLoadRequest | FeatureContext, BlockSize: 16,
				MaxBatchedTokens: 8192, Nonce: an, ID: "engine-c", Models: []string{"Qwen/Qwen3-8B"},
				Tiers: []TierCapacity{{TierGPU, 16384}}, MaxModelLen: 32768}}},
		{name: "welcome_engine_groups", about: "WELCOME from a hybrid engine announcing its KV cache groups (FeatureHybridGroups, sent because the router's HELLO had it): full attention, then a 128-token sliding window, then a Mamba group with 64-token blocks",
			msg: &Welcome{Handshake{
				MinVersion: 1, MaxVersion: 1, Role: RoleEngine, HashScheme: HashXXH3Chained,
				Features: FeatureSnapshot | FeatureHybridGroups, BlockSize: 16, MaxBatchedTokens: 8192, Nonce: an,
				ID: "engine-h", Models: []string{"openai/gpt-oss-20b"}, Tiers: []TierCapacity{{TierGPU, 16384}},
				Groups: []Group{{Kind: GroupFull, BlockSize: 16}, {Kind: GroupSlidingWindow, BlockSize: 16, Window: 128},
					{Kind: GroupMamba, BlockSize: 64}}}}},
		{name: "auth", about: "AUTH: HMAC-SHA256(\"s3cret\", \"kvgate wire v1 dialer\" || welcome_nonce || hello_nonce)",
			msg: &Auth{Proof: DialerProof(secret, &dn, &an)}},
		{name: "ping", about: "PING with opaque data", msg: &Ping{Data: 0x0102030405060708}},
		{name: "ring", about: "RING with an opaque syncring body", msg: &Ring{Body: []byte{0x01, 0xaa, 0xbb, 0xcc}}},
		{name: "pong", about: "PONG echoing it", msg: &Pong{Data: 0x0102030405060708}},
		{name: "goaway", about: "GOAWAY: draining for 30 s", msg: &Goaway{Code: CodeShutdown, DrainMillis: 30000, Message: "engine restarting"}},
		{name: "error_connection", about: "ERROR on stream 0: the connection ends", msg: &Error{Code: CodeAuth, Message: "bad proof"}},
		{name: "error_stream", about: "ERROR on stream 5: that stream ends", stream: 5, msg: &Error{Code: CodeOverloaded, Message: "queue full"}},
		{name: "error_request_limit", about: "ERROR on stream 9: its GENERATE had a count over the engine's limit; only that stream ends", stream: 9,
			msg: &Error{Code: CodeRequestLimit, Message: "stop_token_ids: 1025 items over 1024"}},
		{name: "generate_minimal", about: "GENERATE with only a prompt (greedy, top_p 1)", stream: 1, msg: &Generate{
			RequestID: []byte("r1"), Model: []byte("m"), MaxTokens: 16, TopP: 1, DPRank: AnyRank,
			Prompt: TokensOf([]uint32{1, 2, 3})}},
		{name: "generate_full", about: "GENERATE using every field", stream: 0x01020304, msg: &Generate{
			RequestID: []byte("chatcmpl-42"), Model: []byte("Qwen/Qwen3-8B"), LoRAID: 1, Priority: -5,
			MaxTokens: 256, Temperature: 0.7, TopP: 0.95, TopK: 40, Seed: 1234,
			Flags: GenIgnoreEOS | GenHasSeed | GenWantText, DPRank: 1,
			StopTokens: TokensOf([]uint32{151645, 151643}), CacheSalt: []byte("tenant-a"),
			MMItems:    MMItemsOf([]MMItem{{Offset: 2, Length: 4, Hash: 0xfeedface}}),
			KVTransfer: []byte(`{"do_remote_decode":true}`),
			Guided:     []byte(`{"response_format":{"type":"json_object"}}`),
			Prompt:     TokensOf([]uint32{151644, 872, 198, 9707, 0, 1, 2, 151645})}},
		{name: "generate_sampling", about: "GENERATE with the sampling section (flag SAMPLING, sent because the engine's WELCOME had FeatureSampling): penalties, min_tokens 4, logprobs with 2 alternatives, a logit_bias", stream: 3, msg: &Generate{
			RequestID: []byte("r3"), Model: []byte("m"), MaxTokens: 16, Temperature: 0.5, TopP: 1, DPRank: AnyRank,
			Flags: GenSampling, Prompt: TokensOf([]uint32{1, 2, 3}),
			Sampling: Sampling{PresencePenalty: 0.5, FrequencyPenalty: -0.25, RepetitionPenalty: 1.125, MinTokens: 4,
				Flags: SampleLogprobs, TopLogprobs: 2, LogitBias: LogitBiasOf([]uint32{50256, 13}, []float32{-100, 2.5})}}},
		{name: "tokens_logprobs", about: "TOKENS with the logprobs section (flag LOGPROBS, answering generate_sampling): two tokens, each with its logprob and 2 alternatives", stream: 3, msg: &TokensMsg{
			Flags: TokFirst | TokLogprobs, Tokens: TokensOf([]uint32{11, 1879}),
			Logprobs: mustLogprobs(2, []LogprobEntry{
				{Logprob: -0.5, Top: []Alt{{11, -0.5}, {12, -1.5}}},
				{Logprob: -2, Top: []Alt{{7, -0.25}, {1879, -2}}}})}},
		{name: "tokens_first", about: "TOKENS, first frame: 512 prompt tokens were cached", stream: 1, msg: &TokensMsg{
			Flags: TokFirst, CachedTokens: 512, Tokens: TokensOf([]uint32{9707})}},
		{name: "tokens_text", about: "TOKENS, a middle frame with text", stream: 1, msg: &TokensMsg{
			Tokens: TokensOf([]uint32{11, 1879}), Text: []byte(", world")}},
		{name: "tokens_last", about: "TOKENS, last frame: stop, with usage", stream: 1, msg: &TokensMsg{
			Flags: TokLast, Finish: FinishStop, PromptTokens: 600, CompletionTokens: 4,
			Tokens: TokensOf([]uint32{151645})}},
		{name: "tokens_single", about: "TOKENS, first and last at once", stream: 2, msg: &TokensMsg{
			Flags: TokFirst | TokLast, Finish: FinishLength, CachedTokens: 16, PromptTokens: 20,
			CompletionTokens: 1, Tokens: TokensOf([]uint32{42})}},
		{name: "cancel", about: "CANCEL: the client went away", stream: 1, msg: &Cancel{Reason: CancelClientGone}},
		{name: "kv_events", about: "KV_EVENTS: stored chain, stored child on CPU with LoRA, removed, cleared disk",
			msg: &KVEvents{Seq: 42, TimestampNano: 1_700_000_000_000_000_000, DPRank: 0, Events: events}},
		{name: "kv_events_s2", about: "the same KV_EVENTS, payload compressed with s2 (flags = 1)", codec: CodecS2,
			msg: &KVEvents{Seq: 42, TimestampNano: 1_700_000_000_000_000_000, DPRank: 0, Events: events}},
		{name: "load", about: "LOAD of rank 1", msg: &Load{DPRank: 1, Running: 12, Waiting: 3,
			QueuedPrefillTokens: 20480, ActiveDecodeTokens: 65536, TimestampNano: 1_700_000_000_000_000_000,
			Tiers: []TierUsage{{TierGPU, 30000, 40000}, {TierCPU, 1000, 120000}}}},
		{name: "adapters_resident", about: "ADAPTERS of rank 1, sent at once to a router whose HELLO had FeatureAdapters: 8 slots, two adapters resident",
			msg: &Adapters{DPRank: 1, Change: AdaptersResident, Slots: 8, LoRAs: []LoRA{{ID: 1, Name: "sql-lora"}, {ID: 7, Name: "chat-de"}}}},
		{name: "adapters_loaded", about: "ADAPTERS of rank 0: adapter 9 loaded in 48 ms",
			msg: &Adapters{Change: AdaptersLoaded, Slots: 8, LoadNanos: 48_000_000, LoRAs: []LoRA{{ID: 9, Name: "summarize"}}}},
		{name: "adapters_evicted", about: "ADAPTERS of rank 0: adapter 1 evicted for a slot",
			msg: &Adapters{Change: AdaptersEvicted, Slots: 8, LoRAs: []LoRA{{ID: 1, Name: "sql-lora"}}}},
		{name: "load_request", about: "LOAD_REQUEST (empty payload)", msg: &LoadRequest{}},
		{name: "snapshot_request", about: "SNAPSHOT_REQUEST number 3", msg: &SnapshotRequest{SnapshotID: 3}},
		{name: "snapshot", about: "SNAPSHOT 3, chunk 0, last, as of KV_EVENTS seq 42", msg: &Snapshot{
			SnapshotID: 3, Chunk: 0, Last: true, Seq: 42, Events: events[:2]}},
	}, append(append(traceGoldenCases(), tokenBatchGoldenCases()...), append(disaggGoldenCases(), mediaGoldenCases()...)...)...) // trace_test.go, tokens_batch_test.go, disagg_test.go, media_test.go
}

func mustLogprobs(topN int, entries []LogprobEntry) Logprobs {
	l, err := LogprobsOf(topN, entries)
	if err != nil {
		panic(err)
	}
	return l
}

func encodeGolden(t testing.TB, c goldenCase) []byte {
	var scratch []byte
	b, err := AppendFrameCompressed(nil, c.stream, c.msg, c.codec, &scratch)
	if err != nil {
		t.Fatalf("%s: encoding: %v", c.name, err)
	}
	return b
}

func goldenText(c goldenCase, frame []byte) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# kvgate wire v1 golden vector: %s on stream %d\n# %s\n#\n", c.msg.Type(), c.stream, c.about)
	for _, line := range strings.Split(strings.TrimSpace(dump(c.msg)), "\n") {
		fmt.Fprintf(&sb, "#   %s\n", line)
	}
	for i := 0; i < len(frame); i += 16 {
		chunk := frame[i:min(i+16, len(frame))]
		parts := make([]string, len(chunk))
		for j, v := range chunk {
			parts[j] = fmt.Sprintf("%02x", v)
		}
		sb.WriteString(strings.Join(parts, " ") + "\n")
	}
	return sb.String()
}

// parseGolden returns the frame bytes of a golden file (lines not starting with '#').
func parseGolden(t testing.TB, text string) []byte {
	var hexText strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			hexText.WriteString(strings.ReplaceAll(line, " ", ""))
		}
	}
	b, err := hex.DecodeString(hexText.String())
	if err != nil {
		t.Fatalf("parsing golden hex: %v", err)
	}
	return b
}

func goldenPath(name string) string { return filepath.Join("testdata", "golden", name+".txt") }

func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			frame := encodeGolden(t, c)
			path := goldenPath(c.name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(goldenText(c, frame)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			want := parseGolden(t, string(text))
			// Encode direction.
			if !bytes.Equal(frame, want) {
				t.Fatalf("encoding differs from %s:\n got %x\nwant %x", path, frame, want)
			}
			// Decode direction, through the Reader.
			f, err := NewReader(bytes.NewReader(want), nil).ReadFrame()
			if err != nil {
				t.Fatalf("reading frame: %v", err)
			}
			if f.Stream != c.stream || f.Type != c.msg.Type() {
				t.Fatalf("header: got %s stream %d", f.Type, f.Stream)
			}
			got := NewMessage(f.Type)
			if err := DecodeFrame(f, got, nil); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if dump(got) != dump(c.msg) {
				t.Fatalf("decoded value differs:\n got %s\nwant %s", dump(got), dump(c.msg))
			}
		})
	}
}
