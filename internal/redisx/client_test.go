package redisx_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
)

// TestParseURLTimeouts: the process's client timeouts apply where the URL
// sets none; a timeout the URL sets is kept, 0 included (go-redis reads it
// as "no timeout"). No server is dialled.
func TestParseURLTimeouts(t *testing.T) {
	cases := []struct {
		url               string
		dial, read, write time.Duration
	}{
		{"redis://127.0.0.1:1/0", time.Second, 2 * time.Second, 2 * time.Second},
		{"redis://127.0.0.1:1/0?dial_timeout=3s&read_timeout=4s", 3 * time.Second, 4 * time.Second, 2 * time.Second},
		{"redis://127.0.0.1:1/0?read_timeout=0", time.Second, 0, 2 * time.Second},
	}
	for _, c := range cases {
		o, err := redisx.ParseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		rdb := o.Open()
		opt := rdb.(*redis.Client).Options()
		if opt.DialTimeout != c.dial || opt.ReadTimeout != c.read || opt.WriteTimeout != c.write || opt.PoolTimeout != 2*time.Second {
			t.Errorf("%s: dial %s read %s write %s pool %s; want %s %s %s 2s", c.url, opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout, c.dial, c.read, c.write)
		}
		rdb.Close()
	}
}

// TestParseURLClusterAddresses: comma-separated host:port addresses name a
// cluster; an entry that is not host:port with a port is refused.
func TestParseURLClusterAddresses(t *testing.T) {
	o, err := redisx.ParseURL("127.0.0.1:7000, 127.0.0.1:7001,[::1]:7002")
	if err != nil || !o.IsCluster() {
		t.Fatalf("got %v, %v; want a cluster", o.IsCluster(), err)
	}
	for _, bad := range []string{"127.0.0.1:7000,", "127.0.0.1:7000,nohost", "127.0.0.1:0", "127.0.0.1:x", "127.0.0.1:70000"} {
		if _, err := redisx.ParseURL(bad); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}
