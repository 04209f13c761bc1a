package wire

// FeatureRingByKey, in a replica's (role 3) HELLO and WELCOME, says it
// speaks ring format 2 (syncring/RING.md): load vectors over the engine
// keys every member shares, announced in each HEARTBEAT, instead of format
// 1's vectors by position over identical engine lists. Replicas refuse
// peers without it (ERROR VERSION).
const FeatureRingByKey Feature = 1 << 12

// Ring carries one message of the replica ring (syncring) between two kvgate
// replicas (role 3) after their handshake. Its body is opaque here; its
// layout is specified in syncring/RING.md. RING frames may be compressed.
//
//	| body ... |
type Ring struct{ Body []byte }

// Type implements Message.
func (*Ring) Type() Type { return TypeRing }

// AppendPayload implements Message.
func (m *Ring) AppendPayload(dst []byte) ([]byte, error) { return append(dst, m.Body...), nil }

// Decode implements Message. Body is a view into p.
func (m *Ring) Decode(p []byte, _ *Limits) error {
	m.Body = p
	return nil
}
