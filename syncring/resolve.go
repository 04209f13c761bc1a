package syncring

import (
	"context"
	"net"
	"time"
)

// resolveLoop keeps one dialer per peer address: names are resolved again
// every ResolveEvery, new addresses get a dialer, vanished ones lose it.
func (r *Ring) resolveLoop(ctx context.Context) {
	dialers := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range dialers {
			cancel()
		}
	}()
	t := time.NewTicker(r.cfg.ResolveEvery)
	defer t.Stop()
	for {
		want := r.peerAddrs(ctx)
		for addr := range want {
			if _, ok := dialers[addr]; !ok {
				dctx, cancel := context.WithCancel(ctx)
				dialers[addr] = cancel
				r.wg.Add(1)
				go func() { defer r.wg.Done(); r.dialLoop(dctx, addr) }()
			}
		}
		for addr, cancel := range dialers {
			if !want[addr] {
				cancel()
				delete(dialers, addr)
				r.log.Info("ring: peer address gone from DNS", "addr", addr)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// peerAddrs resolves Config.Peers. A name that fails to resolve keeps no
// addresses this time (its dialers stop) and is tried again next time.
func (r *Ring) peerAddrs(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	for _, p := range r.cfg.Peers {
		host, port, err := net.SplitHostPort(p)
		if err != nil {
			r.log.Warn("ring: bad peer address", "peer", p, "err", err)
			continue
		}
		if net.ParseIP(host) != nil {
			out[p] = true
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, err := r.cfg.Resolve(rctx, host)
		cancel()
		if err != nil {
			r.log.Warn("ring: resolving peers", "name", host, "err", err)
			continue
		}
		for _, ip := range ips {
			out[net.JoinHostPort(ip, port)] = true
		}
	}
	return out
}
