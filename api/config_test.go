package api

import (
	"strings"
	"testing"
	"time"
)

// TestDefaultConfig: the production values are the contract's (MD_MAX_CONNS
// 20000, MD_KEY_STALE_MAX 10m, 10 s to receive a request, 60 s idle) and
// pass New's check.
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.check(); err != nil {
		t.Fatalf("DefaultConfig refused: %v", err)
	}
	if c.MaxConns != 20000 || c.KeyStaleMax != 10*time.Minute || c.RequestTimeout != 10*time.Second || c.IdleTimeout != time.Minute {
		t.Errorf("contract values: got %+v", c)
	}
}

// TestNewRefusesZero: New refuses a field it cannot use, naming it; a zero
// is never taken for a default.
func TestNewRefusesZero(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"KeyCacheTTL", func(c *Config) { c.KeyCacheTTL = 0 }},
		{"KeyStaleMax", func(c *Config) { c.KeyStaleMax = -time.Second }},
		{"KeyNoticeSubject", func(c *Config) { c.KeyNoticeSubject = "" }},
		{"NoticeSubject", func(c *Config) { c.NoticeSubject = "" }},
		{"SearchResync", func(c *Config) { c.SearchResync = 0 }},
		{"MaxConns", func(c *Config) { c.MaxConns = 0 }},
		{"RequestTimeout", func(c *Config) { c.RequestTimeout = 0 }},
		{"IdleTimeout", func(c *Config) { c.IdleTimeout = -time.Second }},
		{"UsageFlush", func(c *Config) { c.UsageFlush = 0 }},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.edit(&c)
		if _, err := New(c, Deps{}); err == nil || !strings.Contains(err.Error(), "Config."+tc.field+" ") {
			t.Errorf("%s: got %v, want an error naming Config.%s", tc.field, err, tc.field)
		}
	}
	// KeyStaleMax 0 means "never serve a stale key": allowed.
	c := DefaultConfig()
	c.KeyStaleMax = 0
	if err := c.check(); err != nil {
		t.Errorf("KeyStaleMax 0: got %v, want accepted", err)
	}
}
