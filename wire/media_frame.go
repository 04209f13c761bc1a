package wire

import "fmt"

// TypeMedia is MEDIA, router to engine on a request's stream: a chunk of
// the bytes of the media its GENERATE announced (PROTOCOL.md 6.11).
const TypeMedia Type = 0x13

// MediaChunkSize is how many bytes of an item a MEDIA frame from
// SendGenerate carries at most: far below any receiver's frame limit,
// small enough that other streams' frames wait at most one chunk's write,
// and one chunk's frame (24 bytes of header and fields more) fits the
// buffer a Writer keeps between writes, so sending allocates nothing per
// chunk.
const MediaChunkSize = spareKeep - HeaderSize - 12

// MediaChunk is one MEDIA frame: bytes [Offset, Offset+len(Data)) of media
// item Item of the stream's GENERATE. Decoding keeps Data a view.
//
//	| item u16 | reserved u16 | offset u32 | data bytes32 (at least 1 byte) |
type MediaChunk struct {
	Item   uint16
	Offset uint32
	Data   []byte
}

// Type implements Message.
func (*MediaChunk) Type() Type { return TypeMedia }

// AppendPayload implements Message.
func (m *MediaChunk) AppendPayload(dst []byte) ([]byte, error) {
	if len(m.Data) == 0 {
		return dst, fmt.Errorf("encoding MEDIA: no data: %w", ErrBadValue)
	}
	e := encoder{b: dst}
	e.u16(m.Item)
	e.zero(2)
	e.u32(m.Offset)
	e.bytes32(m.Data, "data")
	return e.b, e.err
}

// Decode implements Message.
func (m *MediaChunk) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.Item = c.u16("item")
	c.zero(2, "reserved")
	m.Offset = c.u32("offset")
	m.Data = c.bytes32("data")
	if err := c.done("MEDIA"); err != nil {
		return err
	}
	if len(m.Data) == 0 {
		return fmt.Errorf("decoding MEDIA: no data: %w", ErrBadValue)
	}
	return nil
}

// SendGenerate sends g on stream: its GENERATE frame, then, when g has
// media, the items' bytes in MEDIA frames of at most MediaChunkSize, in
// order, each written as soon as the connection takes it (other streams'
// frames may come between them). Use it (or QueueGenerate) for every
// GENERATE: callers fill Generate.MMItems and Generate.Media and never
// build MEDIA frames.
func (w *Writer) SendGenerate(stream uint32, g *Generate) error {
	if err := w.QueueGenerate(stream, g); err != nil {
		return err
	}
	return w.Flush()
}

// QueueGenerate is SendGenerate without the last Flush: a GENERATE
// without media is only queued, and leaves with the next Flush of any
// sender on the connection; its MEDIA frames, if any, are written as
// SendGenerate writes them.
func (w *Writer) QueueGenerate(stream uint32, g *Generate) error {
	if err := w.Queue(stream, g); err != nil {
		return err
	}
	for i := range g.Media.Len() {
		data := g.Media.At(i).Data
		for off := 0; off < len(data); off += MediaChunkSize {
			ch := MediaChunk{Item: uint16(i), Offset: uint32(off), Data: data[off:min(off+MediaChunkSize, len(data))]}
			if err := w.Send(stream, &ch); err != nil {
				return err
			}
		}
	}
	return nil
}
