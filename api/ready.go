package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/internal/retry"
)

// errSearchNotLoaded is Ready's answer until the first load succeeded.
var errSearchNotLoaded = errors.New("search index not loaded yet")

// Ready reports nil once the node holds what it needs in memory to answer
// correctly (the search index); until then the node must not be sent
// traffic. It never turns back: a loaded index is kept fresh by its resync.
func (s *Server) Ready() error {
	if s.search != nil && !s.search.Ready() {
		return errSearchNotLoaded
	}
	return nil
}

// loadSearch loads the search index, retrying with a doubling wait (0.2 s
// to 5 s) while its sources do not answer, then keeps it fresh. Failures
// are logged at the first attempt and then every 30 s, not once per try.
func (s *Server) loadSearch(ctx context.Context) {
	wait := retry.Backoff{First: 200 * time.Millisecond, Max: 5 * time.Second}
	warn := ratelog.Limiter{Every: 30 * time.Second}
	for !s.search.Ready() {
		err := s.search.Load(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if s.log != nil {
			warn.Log(ctx, s.log, slog.LevelWarn, "search index not loaded; the node stays unready and retries", "err", err)
		}
		if wait.Wait(ctx) != nil {
			return
		}
	}
	if s.log != nil && wait.Retrying() {
		s.log.Info("search index loaded; the node is ready", "events", s.search.Len())
	}
	go s.search.Run(ctx, s.cfg.SearchResync)
	go s.search.RunUpdates(ctx)
}
