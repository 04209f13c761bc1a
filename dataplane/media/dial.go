package media

import (
	"fmt"
	"net/netip"
	"syscall"
)

// addressControl is the Dialer.Control hook that refuses private
// addresses: it runs on the address about to be connected, after name
// resolution, so a host name that resolves (or re-resolves) to an
// internal address is refused whatever it resolved to before.
func addressControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot read dialed address %q", ErrPrivateAddress, address)
		}
		if ip := ap.Addr().Unmap(); IsPrivate(ip) {
			return fmt.Errorf("%w: %s is not a public address (kvgate --media-allow-private allows it)", ErrPrivateAddress, ip)
		}
		return nil
	}
}

// nonPublic are the ranges beyond netip's predicates that no public image
// host has: this network, shared CGNAT space, IETF protocol assignments,
// benchmarking, the reserved class E and broadcast, NAT64's well-known
// prefix and the documentation ranges.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// IsPrivate reports an address a fetch must not reach unless allowed:
// loopback, private (RFC 1918, ULA), link-local, multicast, unspecified
// and the other non-public ranges.
func IsPrivate(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
