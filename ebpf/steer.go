package ebpf

import (
	"context"
	"errors"
	"io"
	"net"
)

// Mode is how response bytes go from an upstream socket to a client socket.
type Mode string

// Steering modes.
const (
	// ModeSockmap redirects in the kernel: the upstream socket is in a
	// SOCKHASH and an sk_skb verdict program sends its bytes to the
	// client's egress; they never reach user space.
	ModeSockmap Mode = "sockmap"
	// ModeSplice moves them through a pipe with splice(2): no copy to user
	// space, one system call per chunk.
	ModeSplice Mode = "splice"
	// ModeCopy reads and writes them in user space.
	ModeCopy Mode = "copy"
)

// Steerer relays responses from upstream connections to clients.
type Steerer interface {
	Mode() Mode
	// Prepare readies a pair before the request is forwarded upstream, so
	// that every byte of the response is seen by whatever steers it.
	Prepare(up, client *net.TCPConn) (Pair, error)
	// Close releases what the steerer holds (programs and maps).
	Close() error
}

// Pair is one response being relayed.
type Pair interface {
	// Read reads the response in user space: its headers, before Steer.
	Read(p []byte) (int, error)
	// Steer relays the rest of the response. The caller has read `read`
	// bytes with Read and written them to the client; the response is
	// total bytes in all, or ends when the upstream closes (total < 0).
	// It returns the bytes it relayed and, when it fails, leaves the
	// client in an unknown place of the response: close both sockets.
	Steer(ctx context.Context, read, total int64) (int64, error)
	// Release takes both sockets out of steering; the client connection
	// goes back to user space for its next request.
	Release() error
}

// ErrTruncated: the upstream closed before the declared length.
var ErrTruncated = errors.New("ebpf: upstream closed before the end of the response")

// userPair relays in user space: with splice(2) (the Go runtime splices a
// TCP-to-TCP ReadFrom) or with a plain buffer copy.
type userPair struct {
	up, client *net.TCPConn
	splice     bool
}

func (p *userPair) Read(b []byte) (int, error) { return p.up.Read(b) }
func (p *userPair) Release() error             { return nil }

func (p *userPair) Steer(ctx context.Context, read, total int64) (int64, error) {
	stop := context.AfterFunc(ctx, func() { _ = p.up.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	var src io.Reader = p.up
	want := int64(-1)
	if total >= 0 {
		want = total - read
		src = io.LimitReader(p.up, want)
	}
	var n int64
	var err error
	if p.splice {
		n, err = p.client.ReadFrom(src) // splice(2) between two TCP sockets
	} else {
		n, err = io.CopyBuffer(writerOnly{p.client}, readerOnly{src}, make([]byte, 64<<10))
	}
	if err == nil && want >= 0 && n < want {
		err = ErrTruncated
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return n, err
}

// readerOnly and writerOnly hide ReadFrom/WriteTo so io.CopyBuffer copies.
type (
	readerOnly struct{ io.Reader }
	writerOnly struct{ io.Writer }
)

type userSteerer struct{ splice bool }

// NewSplice returns the splice(2) steerer.
func NewSplice() Steerer { return userSteerer{splice: true} }

// NewCopy returns the user-space copy steerer.
func NewCopy() Steerer { return userSteerer{} }

func (s userSteerer) Mode() Mode {
	if s.splice {
		return ModeSplice
	}
	return ModeCopy
}

func (s userSteerer) Prepare(up, client *net.TCPConn) (Pair, error) {
	return &userPair{up: up, client: client, splice: s.splice}, nil
}

func (userSteerer) Close() error { return nil }
