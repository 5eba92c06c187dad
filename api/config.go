package api

import (
	"fmt"
	"time"

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
