package wire

import (
	"errors"
	"fmt"
	"io"
)

// Reader reads frames from a byte stream that arrives in arbitrary pieces (a
// net.Conn, a pipe). Its buffer grows only as bytes actually arrive, up to one
// header plus MaxFrameSize, so a header that announces a large frame costs
// nothing until the peer really sends it.
type Reader struct {
	r          io.Reader
	lim        Limits
	buf        []byte // buf[start:end] holds unread bytes
	start, end int
	scratch    []byte // decompression output, reused
}

const readerInitialSize = 64 << 10

// handshakeBufferSize is a Conn's buffer until its handshake completes: a
// HELLO is a few hundred bytes, and a peer that sends nothing (or a partial
// frame) should cost little (the buffer grows as its bytes arrive).
const handshakeBufferSize = 1 << 10

// NewReader returns a Reader over r. A nil lim means DefaultLimits.
func NewReader(r io.Reader, lim *Limits) *Reader {
	return newReaderSize(r, lim, readerInitialSize)
}

func newReaderSize(r io.Reader, lim *Limits, size int) *Reader {
	return &Reader{r: r, lim: *limitsOrDefault(lim), buf: make([]byte, size)}
}

// reserve grows the buffer to at least n bytes, keeping what it holds.
func (r *Reader) reserve(n int) {
	if len(r.buf) >= n {
		return
	}
	nb := make([]byte, n)
	r.end = copy(nb, r.buf[r.start:r.end])
	r.start = 0
	r.buf = nb
}

// capFrames lowers the frame limit to at most n until the returned
// function restores it (the handshake's cap, MaxHandshakeFrame).
func (r *Reader) capFrames(n int) (restore func()) {
	full := r.lim.MaxFrameSize
	r.lim.MaxFrameSize = min(full, n)
	return func() { r.lim.MaxFrameSize = full }
}

// Limits returns the reader's limits.
func (r *Reader) Limits() *Limits { return &r.lim }

// ReadFrame returns the next frame with its payload decompressed. The payload
// is valid until the next call. Errors wrap the package sentinels; io.EOF is
// returned only at a frame boundary (io.ErrUnexpectedEOF inside a frame).
func (r *Reader) ReadFrame() (Frame, error) {
	for {
		h, payload, n, err := SplitFrame(r.buf[r.start:r.end], &r.lim)
		if err != nil {
			return Frame{}, err
		}
		if n > 0 {
			r.start += n
			out, scratch, err := Decompress(h, payload, &r.lim, r.scratch)
			r.scratch = scratch
			if err != nil {
				return Frame{}, err
			}
			h.Flags &^= FlagCodecMask
			h.Length = uint32(len(out))
			return Frame{Header: h, Payload: out}, nil
		}
		need := HeaderSize
		if r.end-r.start >= HeaderSize {
			need += int(h.Length)
		}
		if err := r.fill(need); err != nil {
			return Frame{}, err
		}
	}
}

// fill reads at least once, making room for a frame of need bytes.
func (r *Reader) fill(need int) error {
	if r.start > 0 && (r.start == r.end || len(r.buf)-r.start < need) {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		// Full and the frame is larger: double, but never beyond the frame.
		n := min(max(2*len(r.buf), readerInitialSize), need)
		nb := make([]byte, n)
		copy(nb, r.buf[r.start:r.end])
		r.end -= r.start
		r.start = 0
		r.buf = nb
	}
	m, err := r.r.Read(r.buf[r.end:])
	r.end += m
	if m > 0 {
		return nil
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		if r.end > r.start {
			return fmt.Errorf("reading frame: %d bytes of a partial frame: %w", r.end-r.start, io.ErrUnexpectedEOF)
		}
		return io.EOF
	}
	return err
}

// Buffered returns how many unread bytes the reader holds.
func (r *Reader) Buffered() int { return r.end - r.start }

// Framed reports whether a whole frame is buffered (or a header the next
// ReadFrame refuses): ReadFrame would return without reading. A server
// that answers a read's worth of frames together asks it before blocking.
func (r *Reader) Framed() bool {
	_, _, n, err := SplitFrame(r.buf[r.start:r.end], &r.lim)
	return n > 0 || err != nil
}
