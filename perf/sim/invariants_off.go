//go:build !invariants

package sim

const invariants = false
