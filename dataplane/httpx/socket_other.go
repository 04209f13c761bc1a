//go:build !unix

package httpx

import "syscall"

// writeFD never writes where the socket is not a Unix descriptor: every
// response goes the event loop's way.
func writeFD(int, []byte) (int, error) { return 0, syscall.EAGAIN }
