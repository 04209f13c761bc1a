package syncring

import "encoding/binary"

// Chunks travel as zigzag varints of the difference from the same chunk's
// values the previous time it crossed the same connection (RING.md,
// "Delta encoding"). Engine loads change little between rounds a few
// milliseconds apart, so most differences are zero and cost one byte,
// against eight for a raw int64.

// appendDeltas appends values - base (base nil: zeros) as zigzag varints.
func appendDeltas(b []byte, values, base []int64) []byte {
	for i, v := range values {
		if base != nil {
			v -= base[i]
		}
		b = binary.AppendVarint(b, v)
	}
	return b
}

// decodeDeltas reads len(out) varints from b, adds base (nil: zeros) and
// returns the rest of b.
func decodeDeltas(b []byte, out, base []int64) ([]byte, error) {
	for i := range out {
		v, n := binary.Varint(b)
		if n <= 0 {
			return b, errMalformed
		}
		b = b[n:]
		if base != nil {
			v += base[i]
		}
		out[i] = v
	}
	return b, nil
}

// deltaKey names a chunk's slot in a connection's delta state: the same
// (phase, chunk) crosses a connection once per round. Any base the two ends
// agree on decodes correctly, so a change of ring size or engine set only
// costs one round of full values (a base of another length is not used).
type deltaKey struct {
	phase uint8
	index uint16
}

// deltaState is one direction of one connection's memory of chunks last
// sent or received. Both ends update it for every chunk, so they agree on
// the base of the next one.
type deltaState struct {
	last map[deltaKey][]int64
}

// base returns the previous values for k when their length is n, else nil.
func (s *deltaState) base(k deltaKey, n int) []int64 {
	if v, ok := s.last[k]; ok && len(v) == n {
		return v
	}
	return nil
}

// remember stores values as k's next base.
func (s *deltaState) remember(k deltaKey, values []int64) {
	if s.last == nil {
		s.last = map[deltaKey][]int64{}
	}
	s.last[k] = append(s.last[k][:0], values...)
}
