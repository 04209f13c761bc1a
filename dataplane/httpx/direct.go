package httpx

import (
	"errors"
	"sync/atomic"
	"syscall"
)

// A response's bytes leave straight from its handler's goroutine when the
// connection has nothing else on its way: write(2) on the socket, with no
// task for the event loop, no eventfd write and no loop wake-up. Only what
// the socket does not take goes the loop's way (outq.go's queue, or
// AsyncWrite for a whole response), and from then on every byte follows
// it there until the loop has handed all of it to gnet and gnet held
// nothing back.
//
// The connection's write lock (writeQueue.mu) orders the two ways. A
// handler writes directly only under it, and only when direct() holds:
// not closed, nothing queued, no loop flush in progress, no AsyncWrite of
// this connection in flight, no response end queued, and gnet holding no
// bytes for the client the last time the loop looked (outbound, stored
// by the loop under the lock after each of its writes; gnet drains its
// buffer without telling anyone, so outbound may be stale high, which
// only sends the next bytes the loop's way, never stale low). The loop
// holds the lock only to swap buffers and record outbound, never across
// a gnet call: a gnet write that fails closes the connection, and
// OnClose takes the lock.
//
// A direct write never reaches a reused descriptor: gnet v2.9.7's
// eventloop.close (eventloop_unix.go) calls OnClose before it closes the
// socket, and OnClose sets closed under the lock, so a write under the
// lock that saw the connection open ran before the descriptor was
// closed. (Hijack's duplicate is the handler's own socket, closed by it.)
//
// Lock order: writeQueue.mu, then flusher.mu (queue lists the connection
// after releasing it; nothing takes them the other way round).

// beforeWriteLock, when set, runs in queue between admitting bytes and
// taking the write lock: a test's way into the window where the client
// may leave (TestDirectWriteAfterCloseMissesReusedSocket).
var beforeWriteLock atomic.Pointer[func()]

// direct reports whether the handler may write to the socket itself now.
// It runs under st.q.mu.
func (st *connState) direct() bool {
	q := &st.q
	return !st.closed.Load() && !q.listed && !q.flushing && q.async == 0 && q.end == nil &&
		len(q.buf) == 0 && st.outbound.Load() == 0
}

// writeSocket writes b to the client's socket once, under st.q.mu with
// direct() true. It returns how much the socket took; a socket that
// would block took nothing. errGone: the client is gone (reset, or the
// socket shut), and the caller cuts the connection off.
func (st *connState) writeSocket(b []byte) (int, error) {
	n, err := writeFD(st.fd, b)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		return 0, nil
	default:
		return 0, ErrClientGone
	}
}

// writeWhole sends a whole response's message b: straight to the socket
// when direct() holds, the rest through the loop (AsyncWrite), release
// going back to msgBufs once no one needs b. b is counted in pending
// already; it leaves the count as the bytes leave.
func (st *connState) writeWhole(b []byte, release *[]byte) error {
	q := &st.q
	q.mu.Lock()
	n := 0
	if st.direct() {
		var err error
		if n, err = st.writeSocket(b); err != nil {
			q.mu.Unlock()
			st.pending.Add(-int64(len(b)))
			putMsg(release)
			_ = st.c.CloseWithCallback(nil)
			return err
		}
	}
	if n == len(b) {
		q.mu.Unlock()
		st.pending.Add(-int64(n))
		putMsg(release)
		return nil
	}
	q.async++ // later bytes go the loop's way, behind these
	q.mu.Unlock()
	st.pending.Add(-int64(n))
	return st.asyncWrite(b[n:], release)
}

// putMsg returns a pooled message to msgBufs.
func putMsg(release *[]byte) {
	if release != nil && cap(*release) <= maxPooledMsg {
		*release = (*release)[:0]
		msgBufs.Put(release)
	}
}
