package api

import (
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	prefixes := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	lo := prefixes("127.0.0.1/32")
	chain := prefixes("127.0.0.1/32", "10.9.0.0/16", "fd00::/8")
	tests := []struct {
		name    string
		peer    string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies configured", "127.0.0.1", []string{"10.1.2.3"}, nil, "127.0.0.1"},
		{"untrusted peer", "192.0.2.1", []string{"10.1.2.3"}, lo, "192.0.2.1"},
		{"mapped untrusted peer", "::ffff:192.0.2.1", []string{"10.1.2.3"}, lo, "192.0.2.1"},
		{"mapped trusted peer", "::ffff:127.0.0.1", []string{"10.1.2.3"}, lo, "10.1.2.3"},
		{"trusted peer without header", "127.0.0.1", nil, lo, "127.0.0.1"},
		{"single entry", "127.0.0.1", []string{"10.1.2.3"}, lo, "10.1.2.3"},
		{"right-most wins", "127.0.0.1", []string{"6.6.6.6, 10.1.2.3"}, lo, "10.1.2.3"},
		{"trusted entries skipped", "127.0.0.1", []string{"10.1.2.3, 127.0.0.1"}, lo, "10.1.2.3"},
		{"two trusted proxies", "127.0.0.1", []string{"6.6.6.6, 10.1.2.3, 10.9.0.5"}, chain, "10.1.2.3"},
		{"several lines", "127.0.0.1", []string{"6.6.6.6", "10.1.2.3, 10.9.1.1"}, chain, "10.1.2.3"},
		{"later line is nearer", "127.0.0.1", []string{"10.1.2.3", "6.6.6.6"}, lo, "6.6.6.6"},
		{"spaces and empty tail", "127.0.0.1", []string{" 6.6.6.6 ,  10.1.2.3 "}, lo, "10.1.2.3"},
		{"ipv4 with port", "127.0.0.1", []string{"10.1.2.3:4711"}, lo, "10.1.2.3"},
		{"ipv6 entry", "127.0.0.1", []string{"2001:db8::7"}, lo, "2001:db8::7"},
		{"ipv6 entry with port", "127.0.0.1", []string{"[2001:db8::7]:4711"}, lo, "2001:db8::7"},
		{"mapped entry", "127.0.0.1", []string{"::ffff:10.1.2.3"}, lo, "10.1.2.3"},
		{"ipv6 trusted proxy", "fd00::1", []string{"2001:db8::7, fd00::2"}, chain, "2001:db8::7"},
		{"all entries trusted", "127.0.0.1", []string{"10.9.0.1, 10.9.0.2"}, chain, "10.9.0.1"},
		{"unreadable entry stops at last trusted hop", "127.0.0.1", []string{"10.1.2.3, garbage, 10.9.0.5"}, chain, "10.9.0.5"},
		{"unreadable right-most entry", "127.0.0.1", []string{"10.1.2.3, unknown"}, lo, "127.0.0.1"},
		{"empty header", "127.0.0.1", []string{""}, lo, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clientAddr(netip.MustParseAddr(tt.peer), tt.xff, tt.trusted)
			if want := netip.MustParseAddr(tt.want); got != want {
				t.Errorf("clientAddr(%s, %q) = %s, want %s", tt.peer, tt.xff, got, want)
			}
		})
	}
}

func TestParseForwarded(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = unreadable
	}{
		{"10.1.2.3", "10.1.2.3"},
		{" 10.1.2.3 ", "10.1.2.3"},
		{"10.1.2.3:80", "10.1.2.3"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"", ""},
		{"unknown", ""},
		{"10.1.2.3/32", ""},
		{"[2001:db8::1]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseForwarded(tt.in)
			if tt.want == "" {
				if ok {
					t.Errorf("parseForwarded(%q) = %s, want unreadable", tt.in, got)
				}
				return
			}
			if want := netip.MustParseAddr(tt.want); !ok || got != want {
				t.Errorf("parseForwarded(%q) = %s, %v, want %s", tt.in, got, ok, want)
			}
		})
	}
}
