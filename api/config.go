package api

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/internal/notice"
)

// DefaultConfig is the node's production configuration where it has a
// default: the notice subjects, the contract's connection limits and
// deadlines, and the node's own tuning. It is the one home of these values:
// cmd/marketdata takes MD_MAX_CONNS's and MD_KEY_STALE_MAX's defaults from
// it and sets the rest (origins, proxies, secrets) from the environment.
func DefaultConfig() Config {
	return Config{
		KeyCacheTTL:      10 * time.Second,
		KeyStaleMax:      10 * time.Minute,
		KeyNoticeSubject: notice.KeySubject,
		NoticeSubject:    notice.ChangeSubject,
		SearchResync:     time.Minute,
		MaxConns:         20000,
		RequestTimeout:   10 * time.Second,
		IdleTimeout:      60 * time.Second,
		Stream:           stream.DefaultConfig(),
		CountUsage:       true,
		UsageFlush:       500 * time.Millisecond,
	}
}

// check refuses a configuration the node cannot run with, naming the
// field: a zero is never taken for a default. The ranges operators choose
// within are cmd/marketdata's to check, with the variables' names.
func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"KeyCacheTTL", c.KeyCacheTTL}, {"SearchResync", c.SearchResync},
		{"RequestTimeout", c.RequestTimeout}, {"IdleTimeout", c.IdleTimeout},
		{"UsageFlush", c.UsageFlush},
	} {
		if f.v <= 0 {
			return fmt.Errorf("api: Config.%s is %s, want a positive duration", f.name, f.v)
		}
	}
	switch {
	case c.KeyStaleMax < 0:
		return fmt.Errorf("api: Config.KeyStaleMax is %s, want 0 (never) or more", c.KeyStaleMax)
	case c.MaxConns < 1:
		return fmt.Errorf("api: Config.MaxConns is %d, want at least 1", c.MaxConns)
	case c.KeyNoticeSubject == "":
		return fmt.Errorf("api: Config.KeyNoticeSubject is empty")
	case c.NoticeSubject == "":
		return fmt.Errorf("api: Config.NoticeSubject is empty")
	}
	return nil
}

// Config is the node's configuration (contract §1). Every field with a
// default must be set (New refuses a value it cannot use): start from
// DefaultConfig.
type Config struct {
	DocsOrigin     string
	AppOrigins     []string
	TrustedProxies []netip.Prefix
	// AuthFailExempt are client addresses whose failed authentications are
	// neither counted nor blocked. Empty in production: the contract counts
	// every address. `marketdata dev` exempts loopback, so a developer's own
	// mistyped keys never lock the demo key out of their machine.
	AuthFailExempt []netip.Prefix
	KeyPepper      []byte
	CursorSecret   []byte
	// KeyCacheTTL bounds how long a cached key or account record is used
	// without a change notice (10s).
	KeyCacheTTL time.Duration
	// KeyStaleMax is how long a key record fetched from Postgres may be
	// served while Postgres cannot be reached (MD_KEY_STALE_MAX); 0 = never.
	KeyStaleMax time.Duration
	// KeyNoticeSubject carries key and access changes (notice.KeySubject).
	KeyNoticeSubject string
	// NoticeSubject carries ingest's change notices (notice.ChangeSubject).
	NoticeSubject string
	// SearchResync is how often the search index reloads in full (60s), the
	// safety net for a lost change notice.
	SearchResync time.Duration
	// MaxConns caps the node's open client connections (MD_MAX_CONNS,
	// 20000): at the cap it stops accepting until one closes.
	MaxConns int
	// RequestTimeout is how long a request may take to arrive in full,
	// from its first byte (10s); then it is answered 408 and closed.
	RequestTimeout time.Duration
	// IdleTimeout closes a connection that waits this long for a request
	// (60s), quietly.
	IdleTimeout time.Duration
	// Stream sizes the node's streams (stream.DefaultConfig: the contract's
	// ping, pong and stall times).
	Stream stream.Config
	// CountUsage counts every request that passed the window in its
	// account's usage (true); false only for benchmarks measuring what
	// counting costs (marketdata api's hidden --usage flag).
	CountUsage bool
	// UsageFlush is how often the node writes its usage counts (500ms):
	// a node killed outright loses what it counted since its last
	// committed flush, this interval plus a commit, inside the contract's
	// one second.
	UsageFlush time.Duration
}
