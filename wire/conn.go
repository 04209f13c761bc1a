package wire

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Conn is a framed connection over a net.Conn after a successful handshake.
// ReadFrame must be called from one goroutine; Send and Queue from any.
type Conn struct {
	*Reader
	*Writer
	// NetConn is the underlying connection.
	NetConn net.Conn
	// Peer is the peer's handshake (its HELLO or WELCOME body).
	Peer Handshake
}

// DefaultHandshakeTimeout bounds a handshake when the caller sets no deadline.
const DefaultHandshakeTimeout = 10 * time.Second

// Dial connects to addr and runs the dialer's handshake.
func Dial(ctx context.Context, addr string, cfg *HandshakeConfig, lim *Limits) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	c, err := Client(ctx, nc, cfg, lim)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Client runs the dialer's handshake over an established connection.
func Client(ctx context.Context, nc net.Conn, cfg *HandshakeConfig, lim *Limits) (*Conn, error) {
	c := newConn(nc, lim)
	defer setDeadline(ctx, nc)()
	wel, err := DialHandshake(c.Reader, c.Writer, cfg)
	if err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", nc.RemoteAddr(), err)
	}
	c.Peer = wel.Handshake
	c.Reader.reserve(readerInitialSize)
	return c, nil
}

// Server runs the acceptor's handshake over an accepted connection. Until
// it completes, frames are capped at MaxHandshakeFrame and the connection
// costs about a kilobyte of buffer; ctx's deadline (or
// DefaultHandshakeTimeout) bounds it. A listener also bounds how many such
// connections it holds with a HandshakeGate.
func Server(ctx context.Context, nc net.Conn, cfg *HandshakeConfig, lim *Limits) (*Conn, error) {
	c := newConn(nc, lim)
	defer setDeadline(ctx, nc)()
	hello, err := AcceptHandshake(c.Reader, c.Writer, cfg)
	if err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", nc.RemoteAddr(), err)
	}
	c.Peer = hello.Handshake
	c.Reader.reserve(readerInitialSize)
	return c, nil
}

func newConn(nc net.Conn, lim *Limits) *Conn {
	return &Conn{Reader: newReaderSize(nc, lim, handshakeBufferSize), Writer: NewWriter(nc), NetConn: nc}
}

// setDeadline applies ctx's deadline (or the default timeout) to the handshake
// and returns a function that clears it.
func setDeadline(ctx context.Context, nc net.Conn) func() {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultHandshakeTimeout)
	}
	_ = nc.SetDeadline(dl)
	return func() { _ = nc.SetDeadline(time.Time{}) }
}

// Close closes the writer and the connection.
func (c *Conn) Close() error {
	c.Writer.Close()
	return c.NetConn.Close()
}

// SendError sends an ERROR frame (best effort, flushed at once).
func (c *Conn) SendError(stream uint32, code ErrorCode, msg string) error {
	return c.Send(stream, &Error{Code: code, Message: msg})
}
