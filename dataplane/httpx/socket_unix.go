//go:build unix

package httpx

import "syscall"

// writeFD is one write(2) on a client socket (direct.go).
func writeFD(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }
