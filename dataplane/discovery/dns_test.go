package discovery

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from maps a test changes while a Watch runs; a name
// in fail answers with a temporary server failure.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]string
	srvs  map[string][]*net.SRV
	fail  map[string]bool
}

func (f *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[host] {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	if hs, ok := f.hosts[host]; ok {
		return slices.Clone(hs), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if service != "" || proto != "" {
		return "", nil, fmt.Errorf("SRV lookup by service %q proto %q: the name must carry them", service, proto)
	}
	if f.fail[name] {
		return "", nil, &net.DNSError{Err: "server misbehaving", Name: name, IsTemporary: true}
	}
	if rs, ok := f.srvs[name]; ok {
		return name, rs, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

func (f *fakeResolver) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosts[host] = addrs
}

func (f *fakeResolver) failing(host string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[host] = on
}

func TestParseDNS(t *testing.T) {
	for _, tc := range []struct {
		spec, host, port, err string
	}{
		{spec: "engines.default.svc.cluster.local:7000", host: "engines.default.svc.cluster.local", port: "7000"},
		{spec: "_wire._tcp.engines.default.svc.cluster.local.", host: "_wire._tcp.engines.default.svc.cluster.local"},
		{spec: "engines:0", err: "port"},
		{spec: "engines:http", err: "port"},
		{spec: ":7000", err: "NAME[:PORT]"},
		{spec: "[::1]:7000", err: "NAME[:PORT]"},
	} {
		d, err := ParseDNS(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error about %s", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || d.Host != tc.host || d.Port != tc.port {
			t.Errorf("%q: %+v %v, want host %q port %q", tc.spec, d, err, tc.host, tc.port)
		}
	}
}

// TestResolve: A and AAAA records at the given port (IPv6 bracketed), SRV
// targets at their own ports, NXDOMAIN as no engines, and a server failure
// as an error.
func TestResolve(t *testing.T) {
	r := &fakeResolver{hosts: map[string][]string{"engines": {"10.0.0.2", "fd00::1", "10.0.0.1", "10.0.0.2"}},
		srvs: map[string][]*net.SRV{"_wire._tcp.engines": {{Target: "engine-1.engines.", Port: 7001}, {Target: "engine-0.engines.", Port: 7000}}},
		fail: map[string]bool{"broken": true}}
	for _, tc := range []struct {
		spec string
		want []string
		err  bool
	}{
		{spec: "engines:7000", want: []string{"10.0.0.1:7000", "10.0.0.2:7000", "[fd00::1]:7000"}},
		{spec: "_wire._tcp.engines", want: []string{"engine-0.engines:7000", "engine-1.engines:7001"}},
		{spec: "gone:7000", want: nil},
		{spec: "gone", want: nil},
		{spec: "broken:7000", err: true},
		{spec: "broken", err: true},
	} {
		d, err := ParseDNS(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		d.Resolver = r
		got, err := d.Resolve(context.Background())
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v (error %v)", tc.spec, got, err, tc.want, tc.err)
		}
	}
}

// TestDNSWatch: the first answer is reported, then each change, an address
// leaving only once two answers lack it; a failing server changes nothing;
// a name that stops existing reports no engines (two answers later).
func TestDNSWatch(t *testing.T) {
	r := &fakeResolver{hosts: map[string][]string{"engines": {"10.0.0.1"}}, fail: map[string]bool{}}
	d, _ := ParseDNS("engines:7000")
	d.Resolver, d.Every = r, time.Millisecond
	got := make(chan []string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Watch(ctx, func(a []string) { got <- a }) }()
	defer func() { cancel(); <-done }()
	next := func(want ...string) {
		t.Helper()
		select {
		case a := <-got:
			if !slices.Equal(a, want) {
				t.Fatalf("reported %v, want %v", a, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing reported; want %v", want)
		}
	}
	next("10.0.0.1:7000")
	r.failing("engines", true)
	r.set("engines", "10.0.0.9")
	select {
	case a := <-got:
		t.Fatalf("a failing server reported %v", a)
	case <-time.After(50 * time.Millisecond): // many ticks: none may report
	}
	r.failing("engines", false)
	next("10.0.0.1:7000", "10.0.0.9:7000") // 10.0.0.1 is in one answer less
	next("10.0.0.9:7000")
	r.mu.Lock()
	delete(r.hosts, "engines")
	r.mu.Unlock()
	next()
}
