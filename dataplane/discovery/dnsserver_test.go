package discovery

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a tiny authoritative DNS responder on loopback UDP: real
// DNS messages (dnsmessage), answering A, AAAA and SRV questions from its
// tables and NXDOMAIN for any other name, so the DNS source runs against
// Go's own resolver as it would against a cluster's DNS.
type dnsServer struct {
	pc   net.PacketConn
	a    map[string][]netip.Addr // fully qualified name -> A and AAAA
	srvs map[string][]dnsmessage.SRVResource
}

func startDNS(t *testing.T, s *dnsServer) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.pc = pc
	t.Cleanup(func() { pc.Close() })
	go s.serve()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := s.answer(buf[:n]); err == nil {
			_, _ = s.pc.WriteTo(out, from)
		}
	}
}

func (s *dnsServer) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(q.Name.String())
	_, known := s.a[name]
	if _, ok := s.srvs[name]; ok {
		known = true
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeSuccess}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	hdr := dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 5}
	for _, ip := range s.a[name] {
		switch {
		case q.Type == dnsmessage.TypeA && ip.Is4():
			err = b.AResource(hdr, dnsmessage.AResource{A: ip.As4()})
		case q.Type == dnsmessage.TypeAAAA && ip.Is6():
			err = b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	if q.Type == dnsmessage.TypeSRV {
		for _, r := range s.srvs[name] {
			if err := b.SRVResource(hdr, r); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// TestDNSOverTheWire: the DNS source resolves a headless Service's names
// through Go's resolver talking to a real DNS responder: A and AAAA at the
// given port, SRV targets at their ports, NXDOMAIN as no engines.
func TestDNSOverTheWire(t *testing.T) {
	target := func(s string) dnsmessage.Name { return dnsmessage.MustNewName(s) }
	srv := &dnsServer{
		a: map[string][]netip.Addr{"engines.kvgate.svc.cluster.local.": {netip.MustParseAddr("10.1.0.7"),
			netip.MustParseAddr("10.1.0.3"), netip.MustParseAddr("fd00::7")}},
		srvs: map[string][]dnsmessage.SRVResource{"_wire._tcp.engines.kvgate.svc.cluster.local.": {
			{Priority: 0, Weight: 50, Port: 7001, Target: target("engine-1.engines.kvgate.svc.cluster.local.")},
			{Priority: 0, Weight: 50, Port: 7000, Target: target("engine-0.engines.kvgate.svc.cluster.local.")}}},
	}
	res := startDNS(t, srv)
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{"engines.kvgate.svc.cluster.local:7000", []string{"10.1.0.3:7000", "10.1.0.7:7000", "[fd00::7]:7000"}},
		{"_wire._tcp.engines.kvgate.svc.cluster.local", []string{"engine-0.engines.kvgate.svc.cluster.local:7000",
			"engine-1.engines.kvgate.svc.cluster.local:7001"}},
		{"nothing.kvgate.svc.cluster.local:7000", nil},
	} {
		d, err := ParseDNS(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		d.Resolver = res
		got, err := d.Resolve(context.Background())
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.spec, got, err, tc.want)
		}
	}
}
