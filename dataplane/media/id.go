package media

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/zeebo/xxh3"
)

// ID is an image's content id: xxh3-128 of its decoded bytes, high half
// first. It depends on the bytes alone, never on how they travelled.
type ID [16]byte

// IDOf is the content id of an image's bytes.
func IDOf(b []byte) ID { return ID(xxh3.Hash128(b).Bytes()) }

// String is the id in hex, as engines are given it (vLLM's
// multi_modal_uuids take strings).
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Key is the id as it enters block hashes: its low 64 bits (xxh3-128's
// Lo half), the hash of a wire MMItem and of a kvstore MMItem. Router,
// engines and bridges all derive it this way, so an image's blocks hash
// alike wherever they are hashed.
func (id ID) Key() uint64 { return binary.BigEndian.Uint64(id[8:16]) }

// IsZero reports an id not yet computed (an image still to fetch).
func (id ID) IsZero() bool { return id == ID{} }
