// Package syncring will keep several kvgate replicas in agreement on engine
// load: membership by epoch, a chunked ring all-reduce of per-engine load
// vectors over raw TCP, reservation broadcast and index digests
// (DESIGN.md, "Replicas"). It imports wire at most.
package syncring
