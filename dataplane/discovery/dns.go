package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolver looks names up; *net.Resolver is one, tests inject another.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// DNS finds engines under a name, re-resolved every Every: with a Port,
// the name's A and AAAA records, each at Port; without, its SRV records,
// each target at its own port (a Kubernetes headless Service publishes
// both: `engines.ns.svc.cluster.local:7000`, or
// `_wire._tcp.engines.ns.svc.cluster.local` for its named port).
type DNS struct {
	Host, Port string
	Every      time.Duration
	Resolver   Resolver
	Log        *slog.Logger
}

// ParseDNS reads a --engine-dns value, NAME[:PORT].
func ParseDNS(spec string) (*DNS, error) {
	host, port := spec, ""
	if i := strings.LastIndexByte(spec, ':'); i >= 0 {
		host, port = spec[:i], spec[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("--engine-dns %q: port %q is not 1-65535", spec, port)
		}
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || strings.ContainsAny(host, ":/ []") {
		return nil, fmt.Errorf("--engine-dns %q: want NAME[:PORT] (a DNS name; no port: its SRV records give the ports)", spec)
	}
	return &DNS{Host: host, Port: port, Every: 5 * time.Second, Resolver: net.DefaultResolver}, nil
}

// Name implements Source.
func (s *DNS) Name() string {
	if s.Port == "" {
		return "dns-srv:" + s.Host
	}
	return "dns:" + net.JoinHostPort(s.Host, s.Port)
}

// Resolve returns the name's engine addresses, sorted. A name that does
// not exist (NXDOMAIN: a headless Service without ready endpoints) has
// none; any other failure is an error, and the caller keeps what it had.
func (s *DNS) Resolve(ctx context.Context) ([]string, error) {
	var out []string
	if s.Port != "" {
		hosts, err := s.Resolver.LookupHost(ctx, s.Host)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, h := range hosts {
			out = append(out, net.JoinHostPort(h, s.Port))
		}
	} else {
		_, srvs, err := s.Resolver.LookupSRV(ctx, "", "", s.Host)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, r := range srvs {
			if t := strings.TrimSuffix(r.Target, "."); t != "" && r.Port != 0 {
				out = append(out, net.JoinHostPort(t, strconv.Itoa(int(r.Port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// Watch implements Source: it resolves at once, then every Every, and
// reports the union of the last two answers whenever it changes, so an
// address leaves once two answers in a row lack it (a flapping record, or
// a DNS server that briefly answers with fewer endpoints, does not drain
// engines); a failed lookup is logged and changes nothing.
func (s *DNS) Watch(ctx context.Context, set func([]string)) {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	var prev, last []string // the previous answer, the last set reported
	first := true
	for {
		lctx, cancel := context.WithTimeout(ctx, max(s.Every, time.Second))
		addrs, err := s.Resolve(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("discovery: DNS lookup failed: keeping the engines found before", "name", s.Name(), "err", err)
			}
		} else {
			report := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(addrs), prev...))))
			if first || !slices.Equal(report, last) {
				log.Info("discovery: DNS answer", "name", s.Name(), "engines", report)
				set(report)
				last, first = report, false
			}
			prev = addrs
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
