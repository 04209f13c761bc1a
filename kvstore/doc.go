// Package kvstore is kvgate's global KV block index: chained xxh3 block
// hashes (Hasher), and an Index that records which engine (and data-parallel
// rank) holds which block in which tier, answers "how many leading blocks of
// this prompt does each candidate hold" in microseconds, and keeps
// approximate entries for engines that publish no events.
//
// # Layout
//
// The index is 256 shards chosen by the top 8 bits of a block hash. Each
// shard is an open-addressing table of 16-byte, pointer-free entries, one per
// resident (block, slot) pair; a slot is one (engine, rank). Clearing a tier
// or removing an engine bumps a per-slot generation (O(1)); stale entries are
// removed by Sweep and when their shard grows.
//
// A hybrid engine (EngineConfig.Groups: full attention, sliding window,
// Mamba) takes one slot per KV cache group of each rank, behind the rank's
// own: engines name no group in a block hash, so one hash held by two
// groups is two entries. Match walks those slots with the rest and gives
// the rank the hit its engine's coordinator computes (hybrid.go); a model
// with one cache is matched as before, by its leading run.
//
// # Concurrency
//
// One sync.RWMutex (Index.mu) owns every shard, the slot table, the engine
// map and the approximate-mode queues; nothing else is shared. Apply,
// Replace, RecordApprox, AddEngine, RemoveEngine, ExpireApprox and Sweep take
// it for writing; Match, Stats, Digest, Slots and AppendEngineDigests take it
// for reading. The guarantee:
//
//   - a Match sees the index after some prefix of the applied batches: every
//     batch passed to one Apply call is visible entirely or not at all;
//   - a Match waits at most for the one write in progress, which is bounded
//     by its own size (one event batch, at most wire's MaxEvents blocks; one
//     shard's sweep; one shard's growth), never by a whole-index scan.
//
// Beside the lock, one bit per slot (Index.precise, atomics written under
// Index.mu) says whether the slot has had KV events, so that RecordApprox
// returns for such a slot without locking: a router records approximate
// entries on every decision, and for engines that publish events that must
// cost nothing.
//
// There is no other lock, so there is no lock order to respect inside the
// package, and while it holds Index.mu the index calls no code of its
// caller's but Options.Now.
// Which of kvgate's goroutines read and write the index, and under which of
// their own locks: dataplane/LOCKS.md.
package kvstore
