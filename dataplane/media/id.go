package media

import (
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

// IsZero reports an id not yet computed (an image still to fetch).
func (id ID) IsZero() bool { return id == ID{} }
