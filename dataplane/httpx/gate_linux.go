//go:build linux && !poll_opt

package httpx

import (
	"reflect"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// readGate stops and restarts reading one connection's socket, so a
// client that sends ahead meets TCP backpressure instead of filling the
// server's memory. gnet has no call for this: the gate changes the
// connection's epoll registration on the loop's own poller, as gnet's
// default (level-triggered) poller registers it, with the event data
// being the socket's fd. gnet turns reading back on by itself when a
// blocked write drains; the server pauses again on the next read, so at
// most one read buffer (64 KiB) more arrives each time. All of it runs
// on the connection's event loop.
type readGate struct {
	epfd   int // the loop's epoll fd; 0: not looked up yet, -1: unavailable
	paused bool
}

func (g *readGate) pause(c gnet.Conn) {
	if g.lookup(c) && g.set(c, false) {
		g.paused = true
	}
}

func (g *readGate) resume(c gnet.Conn) {
	if g.paused {
		g.paused = false
		g.set(c, true)
	}
}

// set registers interest in reads (or not), and in writes while gnet
// holds bytes for the client.
func (g *readGate) set(c gnet.Conn, read bool) bool {
	var ev uint32
	if read {
		ev = syscall.EPOLLIN | syscall.EPOLLPRI
	}
	if c.OutboundBuffered() > 0 {
		ev |= syscall.EPOLLOUT
	}
	fd := c.Fd()
	return syscall.EpollCtl(g.epfd, syscall.EPOLL_CTL_MOD, fd, &syscall.EpollEvent{Events: ev, Fd: int32(fd)}) == nil
}

// lookup finds the epoll fd of c's event loop (gnet's conn.loop.poller.fd).
func (g *readGate) lookup(c gnet.Conn) bool {
	if g.epfd == 0 {
		g.epfd = epollFD(c)
	}
	return g.epfd > 0
}

func epollFD(c gnet.Conn) int {
	v := reflect.ValueOf(c)
	for _, name := range []string{"loop", "poller", "fd"} {
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return -1
		}
		v = v.Elem().FieldByName(name)
		if !v.IsValid() {
			return -1
		}
	}
	if v.Kind() != reflect.Int || v.Int() <= 0 {
		return -1
	}
	return int(v.Int())
}
