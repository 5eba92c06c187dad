package ingest

import (
	"strings"
	"testing"
	"time"
)

// TestDefaultConfig: the production configuration is the contract's
// (§4 names, notice subject) and passes the worker's own check.
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.check(); err != nil {
		t.Fatalf("DefaultConfig refused: %v", err)
	}
	if c.Stream != "MARKETDATA" || c.SubjectPrefix != "md.v1" || c.DLQStream != "MARKETDATA_DLQ" ||
		c.DLQPrefix != "md.dlq.v1" || c.NoticeSubject != "md.changes.v1" || c.Consumer != "ingest" {
		t.Errorf("names: got %+v, want the contract's", c)
	}
	if c.Replicas != 1 || c.BatchSize != 1000 || c.Linger != 10*time.Millisecond || c.Appliers != 4 ||
		c.AckWait != 5*time.Second || c.MaxDeliveries != 10 || c.MaxAge != 7*24*time.Hour || c.SweepEvery != time.Minute {
		t.Errorf("sizes: got %+v", c)
	}
	ae := DefaultAntiEntropyConfig()
	if ae.Interval != 2*time.Second || ae.Page != 1000 || ae.NoticeSubject != c.NoticeSubject || ae.Settle != time.Second {
		t.Errorf("anti-entropy: got %+v", ae)
	}
}

// TestConfigRefusesZero: a zero (or negative) field is refused with its
// name, never taken for a default; New and the stream setup both check.
func TestConfigRefusesZero(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"Stream", func(c *Config) { c.Stream = "" }},
		{"SubjectPrefix", func(c *Config) { c.SubjectPrefix = "" }},
		{"DLQStream", func(c *Config) { c.DLQStream = "" }},
		{"DLQPrefix", func(c *Config) { c.DLQPrefix = "" }},
		{"NoticeSubject", func(c *Config) { c.NoticeSubject = "" }},
		{"Consumer", func(c *Config) { c.Consumer = "" }},
		{"Replicas", func(c *Config) { c.Replicas = 0 }},
		{"MaxAge", func(c *Config) { c.MaxAge = 0 }},
		{"BatchSize", func(c *Config) { c.BatchSize = 0 }},
		{"Linger", func(c *Config) { c.Linger = 0 }},
		{"Linger", func(c *Config) { c.Linger = -time.Millisecond }},
		{"Appliers", func(c *Config) { c.Appliers = 0 }},
		{"AckWait", func(c *Config) { c.AckWait = 0 }},
		{"MaxDeliveries", func(c *Config) { c.MaxDeliveries = -1 }},
		{"SweepEvery", func(c *Config) { c.SweepEvery = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			if _, err := New(c, Deps{}); err == nil || !strings.Contains(err.Error(), "Config."+tc.field+" ") {
				t.Errorf("New: got %v, want an error naming Config.%s", err, tc.field)
			}
			if err := EnsureStreams(t.Context(), nil, c, nil); err == nil || !strings.Contains(err.Error(), "Config."+tc.field+" ") {
				t.Errorf("EnsureStreams: got %v, want an error naming Config.%s", err, tc.field)
			}
		})
	}
}

// TestAntiEntropyConfigRefusesZero: the same for the anti-entropy pass.
func TestAntiEntropyConfigRefusesZero(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*AntiEntropyConfig)
	}{
		{"Interval", func(c *AntiEntropyConfig) { c.Interval = 0 }},
		{"Page", func(c *AntiEntropyConfig) { c.Page = 0 }},
		{"NoticeSubject", func(c *AntiEntropyConfig) { c.NoticeSubject = "" }},
		{"Settle", func(c *AntiEntropyConfig) { c.Settle = 0 }},
		{"Settle", func(c *AntiEntropyConfig) { c.Settle = time.Minute }}, // past the lock it is held under
	}
	for _, tc := range cases {
		c := DefaultAntiEntropyConfig()
		tc.edit(&c)
		if _, err := NewAntiEntropy(c, AntiEntropyDeps{}); err == nil || !strings.Contains(err.Error(), "AntiEntropyConfig."+tc.field+" ") {
			t.Errorf("%s: got %v, want an error naming AntiEntropyConfig.%s", tc.field, err, tc.field)
		}
	}
	if _, err := NewAntiEntropy(DefaultAntiEntropyConfig(), AntiEntropyDeps{}); err != nil {
		t.Errorf("DefaultAntiEntropyConfig refused: %v", err)
	}
}
