package wire

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// AppendFrameCompressed appends m as one frame whose payload is compressed with
// codec. scratch holds the uncompressed payload between calls (pass the same
// pointer again to avoid allocating). Only KV_EVENTS and SNAPSHOT may be
// compressed; other types, and CodecNone, fall back to AppendFrame.
func AppendFrameCompressed(dst []byte, stream uint32, m Message, codec Codec, scratch *[]byte) ([]byte, error) {
	if codec == CodecNone || !m.Type().Compressible() {
		return AppendFrame(dst, stream, m)
	}
	raw, err := m.AppendPayload((*scratch)[:0])
	*scratch = raw
	if err != nil {
		return dst, fmt.Errorf("encoding %s: %w", m.Type(), err)
	}
	if len(raw) > MaxFrameSizeCeiling {
		return dst, fmt.Errorf("encoding %s: %w", m.Type(), ErrFrameTooLarge)
	}
	start := len(dst)
	dst = AppendHeader(dst, m.Type(), uint8(codec), stream, 0)
	switch codec {
	case CodecS2:
		need := s2.MaxEncodedLen(len(raw))
		dst = grow(dst, need)
		out := s2.Encode(dst[len(dst):len(dst)+need], raw)
		dst = dst[:len(dst)+len(out)]
	case CodecZstd:
		dst = zstdEncoder().EncodeAll(raw, dst)
	default:
		return dst[:start], fmt.Errorf("encoding %s: codec %d: %w", m.Type(), codec, ErrBadValue)
	}
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-HeaderSize))
	return dst, nil
}

// Decompress returns the frame payload uncompressed. An uncompressed payload is
// returned as is; otherwise the result is written into scratch (grown as
// needed, never beyond lim.MaxFrameSize) and the grown scratch is returned too.
func Decompress(h Header, payload []byte, lim *Limits, scratch []byte) (out, newScratch []byte, err error) {
	lim = limitsOrDefault(lim)
	switch h.Codec() {
	case CodecNone:
		return payload, scratch, nil
	case CodecS2:
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, scratch, fmt.Errorf("decompressing %s: %v: %w", h.Type, err, ErrDecompress)
		}
		if n > lim.MaxFrameSize {
			return nil, scratch, fmt.Errorf("decompressing %s: %d bytes: %w", h.Type, n, ErrFrameTooLarge)
		}
		scratch = grow(scratch[:0], n)
		out, err := s2.Decode(scratch[:n], payload)
		if err != nil {
			return nil, scratch, fmt.Errorf("decompressing %s: %v: %w", h.Type, err, ErrDecompress)
		}
		return out, scratch, nil
	case CodecZstd:
		out, err := zstdDecoder(lim.MaxFrameSize).DecodeAll(payload, scratch[:0])
		if err != nil {
			if len(out) > lim.MaxFrameSize || err == zstd.ErrDecoderSizeExceeded {
				return nil, scratch, fmt.Errorf("decompressing %s: %w", h.Type, ErrFrameTooLarge)
			}
			return nil, scratch, fmt.Errorf("decompressing %s: %v: %w", h.Type, err, ErrDecompress)
		}
		return out, out[:0], nil
	}
	return nil, scratch, fmt.Errorf("decompressing %s: codec %d: %w", h.Type, h.Codec(), ErrBadHeader)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdDecs    sync.Map // max decoded size (int) -> *zstd.Decoder
)

func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	})
	return zstdEnc
}

// zstdDecoder returns a shared decoder (DecodeAll is safe for concurrent use)
// that refuses output beyond maxSize, so a small frame cannot expand into an
// allocation the limits do not allow.
func zstdDecoder(maxSize int) *zstd.Decoder {
	if d, ok := zstdDecs.Load(maxSize); ok {
		return d.(*zstd.Decoder)
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(maxSize)),
		zstd.WithDecoderMaxWindow(uint64(max(maxSize, zstd.MinWindowSize))), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(fmt.Sprintf("wire: zstd decoder: %v", err))
	}
	actual, _ := zstdDecs.LoadOrStore(maxSize, d)
	return actual.(*zstd.Decoder)
}
