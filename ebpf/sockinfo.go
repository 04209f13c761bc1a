package ebpf

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// What the sockmap steerer asks the kernel about its sockets.

// control runs f on c's file descriptor.
func control(c *net.TCPConn, f func(fd int) error) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// cookieOf returns c's socket cookie (its key in the socket hashes) and
// its file descriptor.
func cookieOf(c *net.TCPConn) (cookie uint64, fd int, err error) {
	err = control(c, func(f int) error {
		fd = f
		cookie, err = unix.GetsockoptUint64(f, unix.SOL_SOCKET, unix.SO_COOKIE)
		return err
	})
	return cookie, fd, err
}

// sockInfo is what TCP_INFO and SIOCOUTQ say of a client socket.
type sockInfo struct {
	acked  uint64 // bytes the peer acknowledged
	queued uint64 // bytes in the send queue, not acknowledged yet
	state  uint8
}

// entered is every byte written into the socket so far.
func (i sockInfo) entered() uint64 { return i.acked + i.queued }

// errClientGone: the client's connection is no longer established.
var errClientGone = errors.New("ebpf: client connection closed or reset")

func (i sockInfo) alive() error {
	if i.state != unix.BPF_TCP_ESTABLISHED && i.state != unix.BPF_TCP_CLOSE_WAIT {
		return errClientGone
	}
	return nil
}

func readSock(c *net.TCPConn) (si sockInfo, err error) {
	err = control(c, func(fd int) error {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return err
		}
		q, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
		if err != nil {
			return err
		}
		si = sockInfo{acked: info.Bytes_acked, queued: uint64(q), state: info.State}
		return nil
	})
	return si, err
}

// bytesReceived is every byte TCP has received in order on c (its FIN
// counts one).
func bytesReceived(c *net.TCPConn) (n uint64, err error) {
	err = control(c, func(fd int) error {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			n = info.Bytes_received
		}
		return err
	})
	return n, err
}
