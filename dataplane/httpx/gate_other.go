//go:build !linux || poll_opt

package httpx

import "github.com/panjf2000/gnet/v2"

// readGate is a no-op where the server cannot stop reading a socket: a
// client that sends ahead is cut off past 16 pipeline windows instead.
type readGate struct{}

func (*readGate) pause(gnet.Conn)  {}
func (*readGate) resume(gnet.Conn) {}
