// Package syncring keeps several kvgate replicas in agreement on engine
// load (message layout in RING.md; the ring loop's goroutines and what it
// owns in dataplane/LOCKS.md).
//
// Each replica knows its own in-flight work on every engine exactly; the
// fleet needs the sum. Replicas find each other from a static list or a DNS
// name, connect over raw TCP with the wire protocol's handshake and HMAC
// authentication (role 3), and exchange heartbeats. The ring is the replicas
// that hear each other, ordered by id; every change of that set starts a new
// epoch, and chunks and reservations of another epoch are ignored.
//
// Replicas agree on engines by key (kvgate uses each engine's handshake
// id), not by position: every HEARTBEAT lists the sender's keys, and the
// vectors cover the keys all members share, so replicas whose engine sets
// differ for a while keep their ring (engines.go, RING.md format 2).
//
// Every Interval the lowest id starts a round: a chunked ring all-reduce
// (reduce-scatter, then all-gather) of per-engine (prefill, decode,
// requests) vectors, so that each replica sends 2(N-1)/N of the vector per
// round however many replicas there are. Chunks are delta-encoded against
// the previous round's on the same connection. A round that cannot complete
// (a peer died mid-round) is abandoned after RoundTimeout or at the epoch
// change; the previous view stays in use.
//
// Between rounds, every change of a replica's load (a routing decision's
// reservation, a first token, a release) is broadcast at once, or batched
// with the rest of its millisecond under load, so replicas do not herd
// onto one engine for a whole round and do not avoid one that has just
// freed up. A change carries the number of the sender's next own-load
// snapshot; every round also sums each member's snapshot number, so a
// receiver drops exactly the changes the round already counts: none is
// counted twice.
//
// Guarantees: PeerLoad never blocks (an atomic pointer swapped by the ring
// loop); the loop never waits on the network (each peer has a writer
// goroutine with a bounded queue; a peer that lets it fill is dropped); a
// dead peer's contribution leaves the view when the first round of the
// re-formed ring completes. Index digests travel every DigestEvery so that
// operators see, per peer, how alike the replicas' indexes are.
//
// syncring imports wire and nothing else of the project.
package syncring
