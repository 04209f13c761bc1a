// Package e2e holds end-to-end tests that build kvgate's binaries and run
// them as real processes on loopback. They run with the e2e build tag
// (make e2e, part of make test).
package e2e
