package ebpf

import "errors"

// ErrDuplicated: the kernel ran the verdict program twice on some of the
// upstream's bytes, so they would reach the client twice. Seen on Linux
// 6.18 under a client that stops reading: one whole segment is passed to
// user space a second time (perf/RESULTS.md). The response is abandoned
// before the client has all of it, and the client's connection resets
// when the caller closes it.
var ErrDuplicated = errors.New("ebpf: the kernel delivered response bytes twice; response abandoned")

// checkSpan is how many bytes Steer writes between integrity checks in
// the middle of a response.
const checkSpan = 1 << 20

// cut returns err, first making the client's connection reset when it is
// closed if err is ErrDuplicated: the client of a response the upstream's
// close ends could not tell a plain close from the end, and one of a
// response with a length may be only a segment short.
func (p *sockmapPair) cut(err error) error {
	if errors.Is(err, ErrDuplicated) {
		_ = p.client.SetLinger(0)
	}
	return err
}

// intactAtEnd is intact for the write that completes a response of limit
// bytes, with no way round it: if the rest of the upstream's bytes arrive
// between the two reads intact makes, the program has by then counted
// past limit, which TCP alone cannot have received.
func (p *sockmapPair) intactAtEnd(counted, limit uint64) error {
	if err := p.intact(counted); err != nil {
		return err
	}
	_, seen, err := p.stat()
	if err != nil {
		return err
	}
	if seen > limit {
		return p.intact(seen) // past the length: a duplicate, unless the upstream sent more
	}
	return nil
}

// intact returns ErrDuplicated when seen, the program's count read just
// before, is more than TCP has received on the upstream socket since it
// entered the hash. The count is read first and TCP second, so every byte
// counted had been received when TCP is asked: a whole stream never fails
// the check. A duplicate shows unless a segment's worth arrived between
// the two reads, and always once the upstream's last byte has arrived.
func (p *sockmapPair) intact(seen uint64) error {
	recv, err := bytesReceived(p.up)
	if err != nil {
		return err
	}
	if seen > recv-p.recvBase {
		return ErrDuplicated
	}
	return nil
}
