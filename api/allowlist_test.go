package api_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// TestAllowlistIPv4 judges the TCP peer against IPv4 allowlists.
func TestAllowlistIPv4(t *testing.T) {
	w := newWorld(t)
	n := w.node(t)
	tests := []struct {
		allow []string
		ok    bool
	}{
		{[]string{"127.0.0.1/32"}, true},
		{[]string{"127.0.0.0/8"}, true},
		{[]string{"10.0.0.0/8"}, false},
		{[]string{"10.0.0.0/8", "127.0.0.1/32"}, true},
		{[]string{"::1/128"}, false}, // an IPv4 peer is not its IPv6 twin
		{nil, true},                  // no allowlist: any address
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.allow, ","), func(t *testing.T) {
			secret, _ := w.newKey(t, keyOpts{allow: tt.allow})
			a := n.get(t, "/public/v1/key", secret)
			if tt.ok {
				wantOK(t, a)
			} else {
				wantError(t, a, 403, "ip_not_allowed", "127.0.0.1")
			}
		})
	}
}

// TestAllowlistIPv6 judges an IPv6 loopback peer, and an IPv6 client behind
// a trusted IPv6 proxy.
func TestAllowlistIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("IPv6 loopback unavailable: %v", err)
	}
	ln.Close()
	w := newWorld(t)
	n := w.node(t, withListen("[::1]:0"))
	proxied := w.node(t, withListen("[::1]:0"), withTrusted("::1/128"))
	tests := []struct {
		name  string
		n     *node
		allow string
		xff   string
		ok    bool
		addr  string // the address named by a 403
	}{
		{"loopback allowed", n, "::1/128", "", true, ""},
		{"ula refused", n, "fd00::/8", "", false, "::1"},
		{"v4 list refuses v6 peer", n, "127.0.0.1/32", "", false, "::1"},
		{"untrusted peer's header ignored", n, "2001:db8::/32", "2001:db8::7", false, "::1"},
		{"proxied client allowed", proxied, "2001:db8::/32", "2001:db8::7", true, ""},
		{"proxied client refused", proxied, "fd00::/8", "2001:db8::7", false, "2001:db8::7"},
		{"proxied v4 client", proxied, "10.1.2.3/32", "10.1.2.3", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret, _ := w.newKey(t, keyOpts{allow: []string{tt.allow}})
			var kv []string
			if tt.xff != "" {
				kv = []string{"X-Forwarded-For", tt.xff}
			}
			a := tt.n.get(t, "/public/v1/key", secret, kv...)
			if tt.ok {
				wantOK(t, a)
			} else {
				wantError(t, a, 403, "ip_not_allowed", "may not be used from "+tt.addr)
			}
		})
	}
}

// TestForwardedFor: X-Forwarded-For is believed only from a trusted peer, and
// then its right-most entry that is not itself a trusted proxy is the client.
// The 403 names the address judged, so each row shows which one was chosen.
func TestForwardedFor(t *testing.T) {
	w := newWorld(t)
	untrusted := w.node(t)
	trusted := w.node(t, withTrusted("127.0.0.1/32", "10.9.0.0/16"))

	tests := []struct {
		name   string
		n      *node
		allow  string
		xff    []string // one header line each
		client string   // the address the node must judge
		ok     bool     // client is inside allow
	}{
		{"untrusted peer", untrusted, "10.1.2.3/32", []string{"10.1.2.3"}, "127.0.0.1", false},
		{"no header from trusted peer", trusted, "10.1.2.3/32", nil, "127.0.0.1", false},
		{"right-most entry", trusted, "10.1.2.3/32", []string{"6.6.6.6, 10.1.2.3"}, "10.1.2.3", true},
		{"left entry not believed", trusted, "6.6.6.6/32", []string{"6.6.6.6, 10.1.2.3"}, "10.1.2.3", false},
		{"trusted entry skipped", trusted, "10.1.2.3/32", []string{"10.1.2.3, 127.0.0.1"}, "10.1.2.3", true},
		{"two trusted proxies", trusted, "10.1.2.3/32", []string{"6.6.6.6, 10.1.2.3, 10.9.0.5, 127.0.0.1"}, "10.1.2.3", true},
		{"several lines", trusted, "10.1.2.3/32", []string{"6.6.6.6", "10.1.2.3"}, "10.1.2.3", true},
		{"several lines with proxies", trusted, "10.1.2.3/32", []string{"6.6.6.6, 10.1.2.3", "10.9.0.5"}, "10.1.2.3", true},
		{"with port", trusted, "10.1.2.3/32", []string{"10.1.2.3:4711"}, "10.1.2.3", true},
		{"ipv6 client", trusted, "2001:db8::/32", []string{"6.6.6.6, 2001:db8::7"}, "2001:db8::7", true},
		{"ipv6 client with port", trusted, "2001:db8::/32", []string{"[2001:db8::7]:4711"}, "2001:db8::7", true},
		{"mapped ipv4 client", trusted, "10.1.2.3/32", []string{"::ffff:10.1.2.3"}, "10.1.2.3", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			for _, v := range tt.xff {
				kv = append(kv, "X-Forwarded-For", v)
			}
			inside, _ := w.newKey(t, keyOpts{allow: []string{tt.allow}})
			a := tt.n.get(t, "/public/v1/key", inside, kv...)
			if tt.ok {
				wantOK(t, a)
			} else {
				wantError(t, a, 403, "ip_not_allowed", "may not be used from "+tt.client)
			}
			// A key allowlisted elsewhere names the judged address exactly.
			outside, _ := w.newKey(t, keyOpts{allow: []string{"192.0.2.0/24"}})
			a = tt.n.get(t, "/public/v1/key", outside, kv...)
			wantError(t, a, 403, "ip_not_allowed", "may not be used from "+tt.client)
			if got := errMessage(t, a); !strings.HasSuffix(got, " "+tt.client) {
				t.Errorf("message = %q, want it to end with the client %s", got, tt.client)
			}
		})
	}
}

// TestFailedAuthPerForwardedClient: failures are counted per client address
// as judged behind the trusted proxy, not per proxy.
func TestFailedAuthPerForwardedClient(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTrusted("127.0.0.1/32"), withAuthFailLimit(2))
	valid, _ := w.newKey(t, keyOpts{})
	bad := store.NewSecret()
	for range 2 {
		wantError(t, n.get(t, "/public/v1/key", bad, "X-Forwarded-For", "6.6.6.1"), 401, "unauthorized", "unknown")
	}
	wantError(t, n.get(t, "/public/v1/key", valid, "X-Forwarded-For", "6.6.6.1"), 429, "rate_limited", "failed authentications")
	// The spoofed left entry does not move the count to another address.
	wantError(t, n.get(t, "/public/v1/key", valid, "X-Forwarded-For", "1.1.1.1, 6.6.6.1"), 429, "rate_limited", "failed authentications")

	wantError(t, n.get(t, "/public/v1/key", bad, "X-Forwarded-For", "6.6.6.2"), 401, "unauthorized", "unknown")
	wantOK(t, n.get(t, "/public/v1/key", valid, "X-Forwarded-For", "6.6.6.2"))
	// The proxy itself was never blamed.
	wantOK(t, n.get(t, "/public/v1/key", valid))
	if a := n.get(t, "/public/v1/key", bad, "X-Forwarded-For", "6.6.6.2"); a.status != http.StatusUnauthorized {
		t.Errorf("second failure of 6.6.6.2: status = %d, want 401 (the threshold's own request)", a.status)
	}
	wantError(t, n.get(t, "/public/v1/key", valid, "X-Forwarded-For", "6.6.6.2"), 429, "rate_limited", "failed authentications")
}
