//go:build invariants

package sim

// invariants turns on the block accounting check after every step.
const invariants = true
