package wire

import (
	"errors"
	"testing"
)

func disaggGoldenCases() []goldenCase {
	an := [32]byte{}
	for i := range an {
		an[i] = 0x80 + byte(i)
	}
	params := []byte(`{"remote_engine_id":"prefill-0","remote_block_ids":[1,2],"do_remote_prefill":true}`)
	return []goldenCase{
		{name: "welcome_engine_prefill", about: "WELCOME from a prefill-only engine (FeatureDisagg | FeatureKVTransfer | FeaturePrefillOnly)",
			msg: &Welcome{Handshake{
				MinVersion: 1, MaxVersion: 1, Role: RoleEngine, HashScheme: HashXXH3Chained,
				Features: FeatureSnapshot | RolePrefill.Features(), BlockSize: 16, MaxBatchedTokens: 8192, Nonce: an,
				ID: "prefill-0", Models: []string{"Qwen/Qwen3-8B"}, Tiers: []TierCapacity{{TierGPU, 16384}}}}},
		{name: "generate_prefill", about: "GENERATE, prefill side of a hand-off (flag HANDOFF, sent because the engine's WELCOME had FeatureDisagg): keep the KV for decode-1 up to 10 s",
			stream: 7, msg: &Generate{RequestID: []byte("r7"), Model: []byte("m"), MaxTokens: 64, TopP: 1, DPRank: AnyRank,
				Flags: GenHandoff, Prompt: TokensOf([]uint32{1, 2, 3, 4}),
				Handoff: Handoff{Side: HandoffPrefill, DeadlineMillis: 10_000, Peer: []byte("decode-1")}}},
		{name: "tokens_handoff", about: "TOKENS, the prefill engine's hand-off frame: the first token, 16 prompt tokens cached, and its transfer parameters; the stream stays open",
			stream: 7, msg: &TokensMsg{Flags: TokFirst | TokHandoff, CachedTokens: 16, Tokens: TokensOf([]uint32{9707}),
				KVTransfer: params}},
		{name: "generate_decode", about: "GENERATE, decode side of the same hand-off: the prompt and the first token, max_tokens one less, the prefill engine's parameters; wait up to 5 s for the KV",
			stream: 3, msg: &Generate{RequestID: []byte("r7"), Model: []byte("m"), MaxTokens: 63, TopP: 1, DPRank: AnyRank,
				Flags: GenHandoff, KVTransfer: params, Prompt: TokensOf([]uint32{1, 2, 3, 4, 9707}),
				Handoff: Handoff{Side: HandoffDecode, DeadlineMillis: 5_000, Peer: []byte("prefill-0")}}},
	}
}

func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		f    Feature
		want EngineRole
		bad  bool
	}{
		{0, RoleBoth, false},
		{FeatureDisagg, RoleBoth, false},
		{RolePrefill.Features(), RolePrefill, false},
		{RoleDecode.Features() | FeatureS2, RoleDecode, false},
		{FeaturePrefillOnly, 0, true},
		{FeatureDisagg | FeaturePrefillOnly | FeatureDecodeOnly, 0, true},
	} {
		got, err := RoleOf(c.f)
		if c.bad != (err != nil) || !c.bad && got != c.want {
			t.Errorf("RoleOf(%#x) = %v, %v; want %v (error %v)", uint32(c.f), got, err, c.want, c.bad)
		}
		if c.bad && !errors.Is(err, ErrBadValue) {
			t.Errorf("RoleOf(%#x): %v is not ErrBadValue", uint32(c.f), err)
		}
	}
	for _, r := range []EngineRole{RoleBoth, RolePrefill, RoleDecode} {
		if back, err := ParseEngineRole(r.String()); err != nil || back != r {
			t.Errorf("ParseEngineRole(%q) = %v, %v", r.String(), back, err)
		}
		if got, _ := RoleOf(r.Features()); got != r {
			t.Errorf("RoleOf(%v.Features()) = %v", r, got)
		}
	}
	if _, err := ParseEngineRole("decoder"); !errors.Is(err, ErrBadValue) {
		t.Errorf("ParseEngineRole(decoder): %v", err)
	}
}

// TestHandoffRefused checks that each malformed hand-off is refused by name.
func TestHandoffRefused(t *testing.T) {
	ok := func() *Generate {
		return &Generate{Model: []byte("m"), MaxTokens: 4, TopP: 1, Flags: GenHandoff, Prompt: TokensOf([]uint32{1}),
			KVTransfer: []byte("p"), Handoff: Handoff{Side: HandoffDecode, DeadlineMillis: 1, Peer: []byte("e")}}
	}
	for name, mutate := range map[string]func(*Generate){
		"side":        func(g *Generate) { g.Handoff.Side = 3 },
		"deadline_ms": func(g *Generate) { g.Handoff.DeadlineMillis = 0 },
		"peer":        func(g *Generate) { g.Handoff.Peer = nil },
		"kv_transfer": func(g *Generate) { g.KVTransfer = nil },
	} {
		g := ok()
		mutate(g)
		p, err := g.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		var back Generate
		if err := back.Decode(p, nil); !errors.Is(err, ErrBadValue) || !containsStr(err.Error(), name) {
			t.Errorf("%s: decoding gave %v", name, err)
		}
	}
	p, _ := ok().AppendPayload(nil)
	var back Generate
	if err := back.Decode(p, nil); err != nil || string(back.Handoff.Peer) != "e" {
		t.Fatalf("a good hand-off: %v %+v", err, back.Handoff)
	}
	// A hand-off frame must be FIRST and not LAST, with parameters.
	for _, m := range []TokensMsg{
		{Flags: TokHandoff, Tokens: TokensOf([]uint32{1}), KVTransfer: []byte("p")},
		{Flags: TokFirst | TokHandoff, Tokens: TokensOf([]uint32{1})},
		{Flags: TokFirst | TokHandoff, Tokens: TokensOf([]uint32{1, 2}), KVTransfer: []byte("p")},
	} {
		if _, err := m.AppendPayload(nil); !errors.Is(err, ErrBadValue) {
			t.Errorf("encoding %+v: %v", m, err)
		}
	}
	last := TokensMsg{Flags: TokFirst | TokLast | TokHandoff, Finish: FinishStop, Tokens: TokensOf([]uint32{1}), KVTransfer: []byte("p")}
	p, err := last.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var tm TokensMsg
	if err := tm.Decode(p, nil); !errors.Is(err, ErrBadValue) {
		t.Errorf("a LAST hand-off frame decoded: %v", err)
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
