package api

import (
	"net/netip"
	"strings"
)

// clientAddr is the address the limits and the allowlist judge: the TCP peer,
// unless the peer is a trusted proxy; then the right-most X-Forwarded-For
// entry that is not itself a trusted proxy. (Fiber's own IP helpers believe
// the header from any peer, so they are not used.)
func clientAddr(peer netip.Addr, xff []string, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if !inAny(peer, trusted) {
		return peer
	}
	// Walk the header values right to left: the right-most entries were
	// appended by the proxies nearest to us.
	addr := peer
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, ok := parseForwarded(parts[j])
			if !ok {
				// An entry we cannot read ends the trust chain: the last
				// trusted hop is the best answer we have.
				return addr
			}
			addr = a
			if !inAny(a, trusted) {
				return a
			}
		}
	}
	return addr
}

// parseForwarded reads one X-Forwarded-For entry: an IPv4 or IPv6 address,
// optionally with a port ("1.2.3.4:5", "[::1]:5").
func parseForwarded(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func inAny(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
