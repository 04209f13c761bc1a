package wire

import "fmt"

// Protocol versions this implementation speaks.
const (
	MinVersion uint16 = 1
	MaxVersion uint16 = 1
)

// Magic opens every HELLO and WELCOME payload, so that a connection from
// something that is not a kvgate peer fails on its first frame.
const Magic = "KVGW"

// Role says what a peer is.
type Role uint8

// Roles.
const (
	RoleRouter Role = 1 // a kvgate replica talking to engines
	RoleEngine Role = 2 // an inference engine (or kvgate-sim, kvgate-bridge)
	RolePeer   Role = 3 // a kvgate replica talking to another replica (syncring)
)

var roleNames = [...]string{"", "router", "engine", "peer"}

// String returns the role's name.
func (r Role) String() string {
	if r >= RoleRouter && r <= RolePeer {
		return roleNames[r]
	}
	return fmt.Sprintf("role_%d", uint8(r))
}

// HashScheme names how block hashes are computed.
type HashScheme uint8

// HashXXH3Chained is the scheme of kvstore: xxh3_64 over parent hash, block
// token ids and extra keys, seeded (PROTOCOL.md section 9; the extra keys'
// layout is kvstore.Hasher's).
const HashXXH3Chained HashScheme = 1

// String returns the scheme's name as PROTOCOL.md writes it ("none" for 0,
// which routers announce).
func (s HashScheme) String() string {
	switch s {
	case 0:
		return "none"
	case HashXXH3Chained:
		return "xxh3-chained"
	}
	return fmt.Sprintf("hash_scheme_%d", uint8(s))
}

// Tier is a KV cache storage tier, best first.
type Tier uint8

// Tiers.
const (
	TierGPU  Tier = 0
	TierCPU  Tier = 1
	TierDisk Tier = 2
	// NumTiers is the number of tiers version 1 defines.
	NumTiers = 3
)

var tierNames = [NumTiers]string{"gpu", "cpu", "disk"}

// String returns the tier's name.
func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("tier_%d", uint8(t))
}

// Feature is a bit set of optional capabilities a peer announces.
type Feature uint32

// Features.
const (
	FeatureS2           Feature = 1 << 0  // accepts s2-compressed payloads
	FeatureZstd         Feature = 1 << 1  // accepts zstd-compressed payloads
	FeatureSnapshot     Feature = 1 << 2  // answers SNAPSHOT_REQUEST
	FeatureLoadRequest  Feature = 1 << 3  // answers LOAD_REQUEST
	FeatureText         Feature = 1 << 4  // can send detokenized text in TOKENS
	FeatureKVTransfer   Feature = 1 << 5  // understands kv_transfer params (disaggregation)
	FeaturePrefillOnly  Feature = 1 << 6  // a prefill worker of a disaggregated pair
	FeatureDecodeOnly   Feature = 1 << 7  // a decode worker of a disaggregated pair
	FeatureMultimodal   Feature = 1 << 8  // accepts multimodal items in GENERATE
	FeatureHybridGroups Feature = 1 << 9  // HELLO: reads a WELCOME's KV cache groups; WELCOME: carries them (groups.go)
	FeatureGuided       Feature = 1 << 10 // honours GENERATE.guided (structured outputs)
	FeatureTierCosts    Feature = 1 << 11 // HELLO: reads a WELCOME's tier costs; WELCOME: carries them (TierCosts)
)

// Authentication flags of HELLO/WELCOME.
const (
	authRequired = 1 << 0
	authProof    = 1 << 1
)

// TierCapacity is a tier's KV capacity in blocks.
type TierCapacity struct {
	Tier   Tier
	Blocks uint64
}

// LoRA is a loaded LoRA adapter: the id used in GENERATE and KV events, and its name.
type LoRA struct {
	ID   uint32
	Name string
}

// Handshake is the body shared by HELLO and WELCOME.
//
//	| "KVGW" (4) | min_version u16 | max_version u16 | role u8 | hash_scheme u8 |
//	| auth_flags u8 | reserved u8 | features u32 | block_size u32 |
//	| max_batched_tokens u32 | hash_seed u64 | dp_ranks u16 | reserved u16 |
//	| nonce [32] | proof [32] | id str16 | models u16 n, str16 x n |
//	| loras u16 n, (id u32, name str16) x n | tiers u8 n, (tier u8, reserved [7], blocks u64) x n |
//	| WELCOME with FeatureTierCosts only: tier costs (TierCosts) |
//	| WELCOME with FeatureContext only: max_model_len u32 | reserved [4] |
//	| WELCOME with FeatureHybridGroups only: groups (groups.go) |
type Handshake struct {
	MinVersion, MaxVersion uint16
	Role                   Role
	HashScheme             HashScheme
	Features               Feature
	BlockSize              uint32
	MaxBatchedTokens       uint32
	HashSeed               uint64
	DPRanks                uint16
	// Nonce is the sender's fresh random challenge.
	Nonce [32]byte
	// AuthRequired (WELCOME) says the acceptor expects an AUTH frame next.
	AuthRequired bool
	// HasProof (WELCOME) says Proof holds the acceptor's proof.
	HasProof bool
	Proof    [32]byte
	ID       string
	Models   []string
	LoRAs    []LoRA
	Tiers    []TierCapacity
	// TierCosts travel in a WELCOME whose Features has FeatureTierCosts
	// (AcceptHandshake sets the bit when there are costs and the dialer
	// reads them); a HELLO never carries them.
	TierCosts TierCosts
	// MaxModelLen (a WELCOME with FeatureContext) is the engine's context
	// in tokens, prompt plus output; 0 when it does not say.
	MaxModelLen uint32
	// Groups (a WELCOME with FeatureHybridGroups) are the engine's KV cache
	// groups, in the order KV events number them (groups.go); empty for an
	// engine with one full-attention cache, or a dialer that did not ask.
	Groups []Group
}

func (h *Handshake) appendPayload(dst []byte, welcome bool) ([]byte, error) {
	e := encoder{b: dst}
	e.b = append(e.b, Magic...)
	e.u16(h.MinVersion)
	e.u16(h.MaxVersion)
	e.u8(uint8(h.Role))
	e.u8(uint8(h.HashScheme))
	var af uint8
	if h.AuthRequired {
		af |= authRequired
	}
	if h.HasProof {
		af |= authProof
	}
	e.u8(af)
	e.zero(1)
	e.u32(uint32(h.Features))
	e.u32(h.BlockSize)
	e.u32(h.MaxBatchedTokens)
	e.u64(h.HashSeed)
	e.u16(h.DPRanks)
	e.zero(2)
	e.b = append(e.b, h.Nonce[:]...)
	e.b = append(e.b, h.Proof[:]...)
	e.str16([]byte(h.ID), "id")
	if e.fits(len(h.Models), 0xffff, "models") {
		e.u16(uint16(len(h.Models)))
		for _, m := range h.Models {
			e.str16([]byte(m), "model")
		}
	}
	if e.fits(len(h.LoRAs), 0xffff, "loras") {
		e.u16(uint16(len(h.LoRAs)))
		for _, l := range h.LoRAs {
			e.u32(l.ID)
			e.str16([]byte(l.Name), "lora name")
		}
	}
	if e.fits(len(h.Tiers), 0xff, "tiers") {
		e.u8(uint8(len(h.Tiers)))
		for _, t := range h.Tiers {
			e.u8(uint8(t.Tier))
			e.zero(7)
			e.u64(t.Blocks)
		}
	}
	if welcome && h.Features&FeatureTierCosts != 0 {
		h.TierCosts.append(&e)
	}
	if welcome && h.Features&FeatureContext != 0 {
		appendContext(&e, h.MaxModelLen)
	}
	if welcome && h.Features&FeatureHybridGroups != 0 {
		appendGroups(&e, h.Groups)
	}
	return e.b, e.err
}

func (h *Handshake) decode(p []byte, lim *Limits, welcome bool) error {
	c := cursor{b: p}
	if string(c.take(4, "magic")) != Magic {
		if c.err != nil {
			return c.err
		}
		return fmt.Errorf("decoding handshake: bad magic: %w", ErrVersion)
	}
	*h = Handshake{}
	h.MinVersion = c.u16("min_version")
	h.MaxVersion = c.u16("max_version")
	h.Role = Role(c.u8("role"))
	h.HashScheme = HashScheme(c.u8("hash_scheme"))
	af := c.u8("auth_flags")
	c.zero(1, "reserved")
	h.Features = Feature(c.u32("features"))
	h.BlockSize = c.u32("block_size")
	h.MaxBatchedTokens = c.u32("max_batched_tokens")
	h.HashSeed = c.u64("hash_seed")
	h.DPRanks = c.u16("dp_ranks")
	c.zero(2, "reserved")
	copy(h.Nonce[:], c.take(32, "nonce"))
	copy(h.Proof[:], c.take(32, "proof"))
	h.AuthRequired = af&authRequired != 0
	h.HasProof = af&authProof != 0
	if af&^(authRequired|authProof) != 0 {
		c.fail(ErrBadValue, "auth_flags")
	}
	h.ID = string(c.str16("id"))
	if n := c.count(2, 2, lim.MaxListItems, "models"); n > 0 {
		h.Models = make([]string, n)
		for i := range h.Models {
			h.Models[i] = string(c.str16("model"))
		}
	}
	if n := c.count(2, 6, lim.MaxListItems, "loras"); n > 0 {
		h.LoRAs = make([]LoRA, n)
		for i := range h.LoRAs {
			h.LoRAs[i].ID = c.u32("lora id")
			h.LoRAs[i].Name = string(c.str16("lora name"))
		}
	}
	if n := c.count(1, 16, NumTiers, "tiers"); n > 0 {
		h.Tiers = make([]TierCapacity, n)
		for i := range h.Tiers {
			t := c.u8("tier")
			if t >= NumTiers {
				c.fail(ErrBadValue, "tier")
			}
			c.zero(7, "reserved")
			h.Tiers[i] = TierCapacity{Tier: Tier(t), Blocks: c.u64("tier blocks")}
		}
	}
	if welcome && h.Features&FeatureTierCosts != 0 {
		h.TierCosts.decode(&c)
	}
	if welcome && h.Features&FeatureContext != 0 {
		h.MaxModelLen = decodeContext(&c)
	}
	if welcome && h.Features&FeatureHybridGroups != 0 {
		h.Groups = decodeGroups(&c, h.BlockSize)
	}
	if c.err == nil && (h.Role < RoleRouter || h.Role > RolePeer) {
		c.fail(ErrBadValue, "role")
	}
	if c.err == nil && h.MinVersion > h.MaxVersion {
		c.fail(ErrBadValue, "version range")
	}
	return c.done("handshake")
}

// Capacity returns the announced capacity of a tier in blocks, 0 if absent.
func (h *Handshake) Capacity(t Tier) uint64 {
	for _, c := range h.Tiers {
		if c.Tier == t {
			return c.Blocks
		}
	}
	return 0
}

// Hello opens a connection: the dialer's identity, version range and nonce.
type Hello struct{ Handshake }

// Type implements Message.
func (*Hello) Type() Type { return TypeHello }

// AppendPayload implements Message.
func (m *Hello) AppendPayload(dst []byte) ([]byte, error) { return m.appendPayload(dst, false) }

// Decode implements Message.
func (m *Hello) Decode(p []byte, lim *Limits) error { return m.decode(p, limitsOrDefault(lim), false) }

// Welcome answers HELLO: the acceptor's identity, the chosen version (in both
// MinVersion and MaxVersion), its nonce and, when authenticating, its proof.
type Welcome struct{ Handshake }

// Type implements Message.
func (*Welcome) Type() Type { return TypeWelcome }

// AppendPayload implements Message.
func (m *Welcome) AppendPayload(dst []byte) ([]byte, error) { return m.appendPayload(dst, true) }

// Decode implements Message.
func (m *Welcome) Decode(p []byte, lim *Limits) error {
	if err := m.decode(p, limitsOrDefault(lim), true); err != nil {
		return err
	}
	if m.MinVersion != m.MaxVersion {
		return fmt.Errorf("decoding WELCOME: version range %d..%d, want one version: %w",
			m.MinVersion, m.MaxVersion, ErrBadValue)
	}
	return nil
}

// Version returns the version the acceptor chose.
func (m *Welcome) Version() uint16 { return m.MaxVersion }

// NegotiateVersion picks the highest version in both ranges.
func NegotiateVersion(peerMin, peerMax uint16) (uint16, error) {
	hi := min(peerMax, MaxVersion)
	if hi < max(peerMin, MinVersion) {
		return 0, fmt.Errorf("negotiating: peer speaks %d..%d, we speak %d..%d: %w",
			peerMin, peerMax, MinVersion, MaxVersion, ErrVersion)
	}
	return hi, nil
}
