package ratelimit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewRefusesUnusableConfig: New takes the config as given (no
// defaults) and refuses, naming the field, what the scripts cannot use.
func TestNewRefusesUnusableConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	for _, c := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Limit", func(c *Config) { c.Limit = 0 }},
		{"Limit", func(c *Config) { c.Limit = -1 }},
		{"Window", func(c *Config) { c.Window = 0 }},
		{"Window", func(c *Config) { c.Window = 999 * time.Microsecond }},
		{"AuthFailLimit", func(c *Config) { c.AuthFailLimit = 0 }},
		{"AuthFailWindow", func(c *Config) { c.AuthFailWindow = -time.Second }},
		{"Timeout", func(c *Config) { c.Timeout = 0 }},
		{"Timeout", func(c *Config) { c.Timeout = -time.Millisecond }},
	} {
		cfg := unitConfig()
		c.edit(&cfg)
		l, err := New(rdb, cfg, nil, nil)
		if err == nil || l != nil || !strings.Contains(err.Error(), "Config."+c.field+" ") {
			t.Errorf("%+v: got %v, %v; want an error naming Config.%s", cfg, l, err, c.field)
		}
	}
	cfg := unitConfig()
	cfg.Prefix = ""
	l, err := New(rdb, cfg, nil, nil)
	if err != nil || l.Config() != cfg {
		t.Errorf("complete config: got %v, %v; want a limiter with that config, unchanged", l, err)
	}
}

func TestSeconds(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + time.Millisecond, "60"},
		{5 * time.Minute, "300"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.d), func(t *testing.T) {
			if got := Seconds(c.d); got != c.want {
				t.Errorf("Seconds(%v): got %q, want %q", c.d, got, c.want)
			}
		})
	}
}
