package engine

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// An engine's socket is a Go net.TCPConn: the runtime's own poller wakes
// the read loop when frames arrive, on whichever P finds them, and does so
// without a thread of its own while the process is busy. cloudwego/netpoll,
// which this replaced, reads on a poller goroutine of its own that blocks
// in epoll_wait holding a P, then wakes the read loop: one more hand-off
// per read, and on a 2-CPU machine a P stuck in that syscall until the
// runtime's sysmon took it back (20-70 us), which left runnable handler
// goroutines waiting on an idle CPU.
//
// engineConn does its reads and writes through the socket's RawConn, so
// it knows when one would wait: a read that would hands the sinks' batch
// on first (sink.go), and a write arms WriteTimeout only then, so a write
// the socket takes at once costs no deadline.

// engineConn is an engine's socket as the session's wire.Conn uses it.
// Reads come from the read loop alone; wire.Writer makes one write at a
// time. The RawConn callbacks are bound once (readFn, writeFn) and keep
// their state in the struct, so a read or write allocates nothing.
type engineConn struct {
	*net.TCPConn
	raw     syscall.RawConn
	timeout time.Duration // WriteTimeout
	b       *sinkBatch

	readFn, writeFn func(fd uintptr) bool
	rd              ioState // the read in progress
	wr              ioState // the write in progress
}

// ioState is one read's or write's buffer and outcome.
type ioState struct {
	p     []byte
	n     int
	err   error
	wait  bool // a read: wait when the socket is empty; a write: the deadline is armed
	again bool // a read: the socket is empty and the batch goes first
}

// dialEngine connects to addr within timeout.
func dialEngine(addr string, timeout, writeTimeout time.Duration, b *sinkBatch) (*engineConn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, errors.New("engine: not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &engineConn{TCPConn: tc, raw: raw, timeout: writeTimeout, b: b}
	c.readFn, c.writeFn = c.tryRead, c.tryWrite
	return c, nil
}

// Read implements io.Reader. Before it waits for the engine, the batch
// goes to the sinks; so it does after sinkBatchBytes read.
func (c *engineConn) Read(p []byte) (int, error) {
	b := c.b
	if len(b.streams) > 0 && b.bytes >= sinkBatchBytes {
		b.flush()
	}
	for {
		c.rd = ioState{p: p, wait: len(b.streams) == 0} // nothing to hand on: a read that would wait waits
		rerr := c.raw.Read(c.readFn)
		st := c.rd
		c.rd = ioState{}
		switch {
		case rerr != nil:
			return 0, rerr
		case st.again:
			b.flush() // outside the callback: a sink may close the connection
			continue
		case st.err != nil:
			return 0, os.NewSyscallError("read", st.err)
		case st.n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		b.bytes += st.n
		return st.n, nil
	}
}

// tryRead is Read's RawConn callback: false to wait for the socket.
func (c *engineConn) tryRead(fd uintptr) bool {
	st := &c.rd
	for {
		st.n, st.err = syscall.Read(int(fd), st.p)
		switch {
		case st.err == syscall.EINTR:
			continue
		case st.err == syscall.EAGAIN && !st.wait:
			st.again, st.err = true, nil
		case st.err == syscall.EAGAIN:
			return false
		}
		return true
	}
}

// Write implements io.Writer. A write the socket does not take at once
// has WriteTimeout from then on.
func (c *engineConn) Write(p []byte) (int, error) {
	c.wr = ioState{p: p}
	werr := c.raw.Write(c.writeFn)
	st := c.wr
	c.wr = ioState{}
	if st.wait {
		_ = c.SetWriteDeadline(time.Time{})
	}
	if werr != nil {
		return st.n, werr
	}
	if st.err != nil {
		return st.n, os.NewSyscallError("write", st.err)
	}
	return st.n, nil
}

// tryWrite is Write's RawConn callback: false to wait for the socket.
func (c *engineConn) tryWrite(fd uintptr) bool {
	st := &c.wr
	for st.n < len(st.p) {
		m, err := syscall.Write(int(fd), st.p[st.n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if !st.wait {
				st.wait = true
				_ = c.SetWriteDeadline(time.Now().Add(c.timeout))
			}
			return false
		case err != nil:
			st.err = err
			return true
		}
		st.n += m
	}
	return true
}
