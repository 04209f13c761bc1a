package ebpf

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// Steer turns steering on and relays in user space only what the program
// passed: what arrived before user space caught up, and what went past the
// client's credit. It returns when the program has counted total bytes, or
// the upstream closed, and every redirected byte has entered the client's
// socket.
func (p *sockmapPair) Steer(ctx context.Context, read, total int64) (int64, error) {
	limit := uint64(0)
	if total >= 0 {
		limit = uint64(total)
	}
	si, err := readSock(p.client)
	if err != nil {
		return 0, err
	}
	base, ackedBase := si.entered(), si.acked
	// credit lets the program run MaxClientQueue bytes past what the client
	// has acknowledged of this response; it also checks the client is there.
	credit := func() (uint64, error) {
		si, err := readSock(p.client)
		if err == nil {
			err = si.alive()
		}
		return uint64(read) + (si.acked - ackedBase) + MaxClientQueue, err
	}
	p.s.mu.Lock()
	p.s.waiting[p.upCookie] = p
	p.s.mu.Unlock()
	defer func() {
		p.s.mu.Lock()
		delete(p.s.waiting, p.upCookie)
		p.s.mu.Unlock()
		_ = p.up.SetReadDeadline(time.Time{})
	}()
	consumed := uint64(read)
	c, err := credit()
	if err == nil {
		err = p.setCtl(consumed, limit, c)
	}
	if err != nil {
		return 0, err
	}
	var written uint64 // bytes user space wrote to the client after base
	var checked uint64 // written at the last integrity check
	buf := make([]byte, 64<<10)
	for {
		passed, seen, err := p.stat()
		if err != nil {
			return 0, err
		}
		if limit > 0 && seen >= limit && passed == consumed {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_ = p.up.SetReadDeadline(time.Now().Add(checkEvery))
		n, rerr := p.up.Read(buf)
		var counted uint64 // the program's count once these bytes were read
		if n > 0 {
			// Passed bytes follow every byte redirected so far: wait until
			// those have entered the client's socket before writing these.
			var redirected uint64
			if counted, redirected, err = p.waitRedirected(ctx, base, written); err != nil {
				return 0, err
			}
			// Nothing is redirected while user space holds passed bytes,
			// so this write completes a response with a length exactly
			// when it reaches that length: the client must not get it if
			// a segment came twice.
			if limit > 0 && consumed+uint64(n)+redirected >= limit {
				if err := p.intactAtEnd(counted, limit); err != nil {
					return 0, p.cut(err)
				}
			}
			if _, err := p.client.Write(buf[:n]); err != nil {
				return 0, err
			}
			consumed += uint64(n)
			written += uint64(n)
			p.s.relayed.Add(uint64(n))
		}
		if c, err = credit(); err == nil {
			err = p.setCtl(consumed, limit, c)
		}
		if err != nil {
			return 0, err
		}
		// A check now and then ends a duplicated response early. It comes
		// after the control entry is renewed, so it does not hold
		// redirecting back.
		if n > 0 && written-checked >= checkSpan {
			checked = written
			if err := p.intact(counted); err != nil {
				return 0, p.cut(err)
			}
		}
		if rerr != nil {
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(rerr, net.ErrClosed) || isEOF(rerr) {
				if limit > 0 {
					if _, seen, _ := p.stat(); seen < limit {
						return 0, ErrTruncated
					}
				}
				break
			}
			return 0, rerr
		}
	}
	seen, _, err := p.waitRedirected(ctx, base, written)
	if err != nil {
		return 0, err
	}
	if err := p.intact(seen); err != nil {
		return 0, p.cut(err)
	}
	return int64(seen) - read, nil
}

// waitRedirected waits until every byte the program redirected has entered
// the client's socket (it may still sit in the kernel's redirect backlog):
// the bytes that entered since base, less user space's own writes, cover
// the redirected ones. It returns the program's count of bytes and of
// redirected bytes as it last read them.
func (p *sockmapPair) waitRedirected(ctx context.Context, base, written uint64) (seen, redirected uint64, err error) {
	for {
		passed, seen, err := p.stat()
		if err != nil {
			return 0, 0, err
		}
		redirected := seen - passed
		si, err := readSock(p.client)
		if err != nil {
			return 0, 0, err
		}
		if si.entered()-base >= written+redirected {
			return seen, redirected, nil
		}
		if err := si.alive(); err != nil {
			return 0, 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
