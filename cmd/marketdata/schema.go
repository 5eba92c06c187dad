package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/marketdata/marketdata/internal/retry"
	"github.com/marketdata/marketdata/store"
)

// schemaGate holds whether the database schema was found to be this
// binary's. A long-running process starts while Postgres is down; the
// schema is checked once, the first time one of its databases answers. A
// schema that is not this binary's (not migrated, or newer) then stops the
// process with the same error a start on it always gave: it refuses to
// serve on it. A running process does not check again (a later migration
// does not stop it).
type schemaGate struct {
	ok      atomic.Bool
	lastErr atomic.Pointer[string]
}

// errSchemaUnchecked is the gate's readiness answer until the check passed.
var errSchemaUnchecked = errors.New("database schema not checked yet: postgres does not answer")

// check is the gate's readiness probe.
func (g *schemaGate) check(context.Context) error {
	if g.ok.Load() {
		return nil
	}
	if e := g.lastErr.Load(); e != nil {
		return fmt.Errorf("%w (%s)", errSchemaUnchecked, *e)
	}
	return errSchemaUnchecked
}

// watchSchema checks the schema on the first of stores to answer, trying
// every 0.25 s to 2 s until one does. It sends a schema refusal (or any
// other error that is not about reaching the database) to fatal and
// returns; it returns quietly when ctx ends.
func watchSchema(ctx context.Context, stores []*store.Store, log *slog.Logger, fatal chan<- error) *schemaGate {
	g := &schemaGate{}
	try := func() (bool, error) {
		var last error
		for _, st := range stores {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := st.CheckSchema(cctx)
			cancel()
			if err == nil {
				return true, nil
			}
			if !store.IsUnavailable(err) && ctx.Err() == nil {
				return false, err
			}
			last = err
		}
		msg := last.Error()
		g.lastErr.Store(&msg)
		return false, nil
	}
	if ok, err := try(); ok || err != nil {
		// Decided at once: the common case answers before the node listens.
		g.ok.Store(ok)
		if err != nil {
			fatal <- err
		}
		return g
	}
	log.Warn("postgres does not answer; starting unready, the schema is checked once it answers")
	go func() {
		wait := retry.Backoff{First: 250 * time.Millisecond, Max: 2 * time.Second}
		for {
			if wait.Wait(ctx) != nil {
				return
			}
			ok, err := try()
			if err != nil {
				fatal <- err
				return
			}
			if ok {
				g.ok.Store(true)
				log.Info("postgres answers; database schema checked")
				return
			}
		}
	}()
	return g
}
