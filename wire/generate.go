package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// GenerateFlags are the boolean options of GENERATE.
type GenerateFlags uint32

// GENERATE flags.
const (
	GenIgnoreEOS GenerateFlags = 1 << 0 // keep generating past EOS until max_tokens
	GenHasSeed   GenerateFlags = 1 << 1 // Seed is set
	GenWantText  GenerateFlags = 1 << 2 // include detokenized text in TOKENS
	// GenSampling: the sampling section follows the prompt (Sampling; only
	// to engines with FeatureSampling).
	GenSampling GenerateFlags = 1 << 3
	// GenTrace: the trace section follows (Trace, trace.go; only to
	// engines with FeatureTrace).
	GenTrace   GenerateFlags = 1 << 4
	genDefined               = GenIgnoreEOS | GenHasSeed | GenWantText | GenSampling | GenTrace | GenHandoff | GenMedia // GenHandoff: disagg.go, GenMedia: media.go
)

// AnyRank in Generate.DPRank lets the engine pick the data-parallel rank.
const AnyRank uint16 = 0xffff

// MMItem places one multimodal item (an image, audio clip...) in the prompt: it
// covers token positions [Offset, Offset+Length) and its content hash enters the
// hash of every block it overlaps.
type MMItem struct {
	Offset, Length uint32
	Hash           uint64
}

const mmItemSize = 16

// MMItems is a read-only view of packed MMItem records.
type MMItems struct{ b []byte }

// Len returns the number of items.
func (m MMItems) Len() int { return len(m.b) / mmItemSize }

// At returns the i-th item.
func (m MMItems) At(i int) MMItem {
	r := m.b[i*mmItemSize:]
	return MMItem{
		Offset: binary.LittleEndian.Uint32(r),
		Length: binary.LittleEndian.Uint32(r[4:]),
		Hash:   binary.LittleEndian.Uint64(r[8:]),
	}
}

// MMItemsOf packs items into a view (encoding side).
func MMItemsOf(items []MMItem) MMItems {
	b := make([]byte, 0, len(items)*mmItemSize)
	for _, it := range items {
		b = binary.LittleEndian.AppendUint32(b, it.Offset)
		b = binary.LittleEndian.AppendUint32(b, it.Length)
		b = binary.LittleEndian.AppendUint64(b, it.Hash)
	}
	return MMItems{b: b}
}

// Generate asks an engine to run one request on the frame's stream. Decoding
// does not allocate: byte fields and token ids are views into the payload.
//
//	| request_id str16 | model str16 | lora_id u32 | priority i32 |
//	| max_tokens u32 | temperature f32 | top_p f32 | top_k i32 |
//	| seed u64 | flags u32 | dp_rank u16 | reserved u16 |
//	| stop_token_ids: u32 n, u32 x n | cache_salt str16 |
//	| mm_items: u16 n, (offset u32, length u32, hash u64) x n |
//	| kv_transfer: u32 n, bytes | guided: u32 n, bytes | prompt: u32 n, u32 x n |
//	| sampling (flag GenSampling only): see Sampling |
//	| trace (flag GenTrace only): see Trace |
//	| hand-off (flag GenHandoff only): see Handoff (disagg.go) |
//	| media (flag GenMedia only): see Media (media.go); the bytes follow in MEDIA frames |
type Generate struct {
	RequestID   []byte
	Model       []byte
	LoRAID      uint32 // 0: base model
	Priority    int32  // lower runs first, as in vLLM
	MaxTokens   uint32
	Temperature float32
	TopP        float32
	TopK        int32 // <= 0: disabled
	Seed        uint64
	Flags       GenerateFlags
	DPRank      uint16 // AnyRank: engine's choice
	StopTokens  Tokens
	CacheSalt   []byte
	MMItems     MMItems
	// KVTransfer is opaque to kvgate: the parameters a prefill/decode pair
	// exchange to hand over KV (for example vLLM's kv_transfer_params JSON).
	KVTransfer []byte
	// Guided constrains the output (structured outputs): a JSON object with
	// the API's "response_format" and/or "tool_choice", as the client sent
	// them. Empty: unconstrained. Only for engines with FeatureGuided.
	Guided []byte
	Prompt Tokens
	// Sampling is the sampling section, sent when Flags has GenSampling.
	Sampling Sampling
	// Trace is the W3C trace context, sent when Flags has GenTrace.
	Trace Trace
	// Handoff is the prefill/decode hand-off section, sent when Flags has GenHandoff.
	Handoff Handoff
	// Media are the images of MMItems, item for item, sent with GenMedia
	// (set by the encoder when Media has items) to engines with
	// FeatureMultimodal; Writer.SendGenerate sends their bytes.
	Media Media
}

// Type implements Message.
func (*Generate) Type() Type { return TypeGenerate }

// AppendPayload implements Message.
func (m *Generate) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.str16(m.RequestID, "request_id")
	e.str16(m.Model, "model")
	e.u32(m.LoRAID)
	e.u32(uint32(m.Priority))
	e.u32(m.MaxTokens)
	e.f32(m.Temperature)
	e.f32(m.TopP)
	e.u32(uint32(m.TopK))
	e.u64(m.Seed)
	e.u32(uint32(m.wireFlags()))
	e.u16(m.DPRank)
	e.zero(2)
	e.tokens(m.StopTokens)
	e.str16(m.CacheSalt, "cache_salt")
	if e.fits(m.MMItems.Len(), math.MaxUint16, "mm_items") {
		e.u16(uint16(m.MMItems.Len()))
		e.b = append(e.b, m.MMItems.b...)
	}
	e.bytes32(m.KVTransfer, "kv_transfer")
	e.bytes32(m.Guided, "guided")
	e.tokens(m.Prompt)
	if m.Flags&GenSampling != 0 {
		m.Sampling.append(&e)
	}
	if m.Flags&GenTrace != 0 {
		m.Trace.append(&e)
	}
	if m.Flags&GenHandoff != 0 {
		m.Handoff.append(&e)
	}
	if m.wireFlags()&GenMedia != 0 {
		m.Media.append(&e)
	}
	return e.b, e.err
}

// Decode implements Message.
func (m *Generate) Decode(p []byte, lim *Limits) error {
	lim = limitsOrDefault(lim)
	c := cursor{b: p}
	m.RequestID = c.str16("request_id")
	m.Model = c.str16("model")
	m.LoRAID = c.u32("lora_id")
	m.Priority = int32(c.u32("priority"))
	m.MaxTokens = c.u32("max_tokens")
	m.Temperature = c.f32("temperature")
	m.TopP = c.f32("top_p")
	m.TopK = int32(c.u32("top_k"))
	m.Seed = c.u64("seed")
	m.Flags = GenerateFlags(c.u32("flags"))
	m.DPRank = c.u16("dp_rank")
	c.zero(2, "reserved")
	m.StopTokens = c.tokens(lim.MaxStopTokens, "stop_token_ids")
	m.CacheSalt = c.str16("cache_salt")
	n := c.count(2, mmItemSize, lim.MaxListItems, "mm_items")
	m.MMItems = MMItems{b: c.take(n*mmItemSize, "mm_items")}
	m.KVTransfer = c.bytes32("kv_transfer")
	m.Guided = c.bytes32("guided")
	m.Prompt = c.tokens(lim.MaxTokens, "prompt")
	m.Sampling = Sampling{}
	if m.Flags&GenSampling != 0 {
		m.Sampling.decode(&c, lim)
	}
	m.Trace = Trace{}
	if m.Flags&GenTrace != 0 {
		m.Trace.decode(&c)
	}
	m.Handoff = Handoff{}
	if m.Flags&GenHandoff != 0 {
		m.Handoff.decode(&c)
	}
	m.Media = Media{}
	if m.Flags&GenMedia != 0 {
		m.Media.decode(&c, lim)
	}
	if err := c.done("GENERATE"); err != nil {
		return err
	}
	return m.validate()
}

func (m *Generate) validate() error {
	switch {
	case m.Flags&^genDefined != 0:
		return fmt.Errorf("decoding GENERATE: flags %#x: %w", uint32(m.Flags), ErrBadValue)
	case m.Prompt.Len() == 0:
		return fmt.Errorf("decoding GENERATE: empty prompt: %w", ErrBadValue)
	case !(m.Temperature >= 0 && m.Temperature <= 1000): // also rejects NaN
		return fmt.Errorf("decoding GENERATE: temperature %v: %w", m.Temperature, ErrBadValue)
	case !(m.TopP > 0 && m.TopP <= 1):
		return fmt.Errorf("decoding GENERATE: top_p %v: %w", m.TopP, ErrBadValue)
	}
	if m.Flags&GenSampling != 0 {
		if err := m.Sampling.validate(); err != nil {
			return fmt.Errorf("decoding GENERATE: %w", err)
		}
	}
	if m.Flags&GenTrace != 0 {
		if err := m.Trace.validate(); err != nil {
			return fmt.Errorf("decoding GENERATE: %w", err)
		}
	}
	if m.Flags&GenHandoff != 0 {
		if err := m.Handoff.validate(len(m.KVTransfer)); err != nil {
			return fmt.Errorf("decoding GENERATE: %w", err)
		}
	}
	for i := range m.MMItems.Len() {
		it := m.MMItems.At(i)
		if uint64(it.Offset)+uint64(it.Length) > uint64(m.Prompt.Len()) {
			return fmt.Errorf("decoding GENERATE: mm item %d outside prompt: %w", i, ErrBadValue)
		}
	}
	return m.validateMedia()
}

// PayloadSize returns the length of the encoded payload, without encoding it.
func (m *Generate) PayloadSize() int {
	const fixed = 4*6 + 8 + 4 + 2 + 2 // lora_id .. top_k, seed, flags, dp_rank, reserved
	n := 2 + len(m.RequestID) + 2 + len(m.Model) + fixed + 4 + 4*m.StopTokens.Len() + 2 + len(m.CacheSalt) +
		2 + mmItemSize*m.MMItems.Len() + 4 + len(m.KVTransfer) + 4 + len(m.Guided) + 4 + 4*m.Prompt.Len()
	if m.Flags&GenSampling != 0 {
		n += m.Sampling.size()
	}
	if m.Flags&GenTrace != 0 {
		n += m.Trace.size()
	}
	if m.Flags&GenHandoff != 0 {
		n += m.Handoff.size()
	}
	if m.wireFlags()&GenMedia != 0 {
		n += m.Media.size()
	}
	return n
}

// CheckLimits reports what a receiver with limits lim would refuse in m
// for its content: a count over a limit (ErrLimit) or a payload over
// MaxFrameSize (ErrFrameTooLarge, which an engine cannot answer on the
// stream: it ends the connection). A sender checks before sending, so
// that one request cannot cost a connection.
func (m *Generate) CheckLimits(lim *Limits) error {
	lim = limitsOrDefault(lim)
	switch {
	case m.StopTokens.Len() > lim.MaxStopTokens:
		return fmt.Errorf("GENERATE stop_token_ids: %d over %d: %w", m.StopTokens.Len(), lim.MaxStopTokens, ErrLimit)
	case m.Prompt.Len() > lim.MaxTokens:
		return fmt.Errorf("GENERATE prompt: %d tokens over %d: %w", m.Prompt.Len(), lim.MaxTokens, ErrLimit)
	case m.MMItems.Len() > lim.MaxListItems:
		return fmt.Errorf("GENERATE mm_items: %d over %d: %w", m.MMItems.Len(), lim.MaxListItems, ErrLimit)
	case m.Sampling.LogitBias.Len() > lim.MaxListItems:
		return fmt.Errorf("GENERATE logit_bias: %d over %d: %w", m.Sampling.LogitBias.Len(), lim.MaxListItems, ErrLimit)
	case m.Media.Len() > 0 && m.checkMediaLimits(lim) != nil:
		return m.checkMediaLimits(lim)
	case m.PayloadSize() > lim.MaxFrameSize:
		return fmt.Errorf("GENERATE of %d bytes over %d: %w", m.PayloadSize(), lim.MaxFrameSize, ErrFrameTooLarge)
	}
	return nil
}
