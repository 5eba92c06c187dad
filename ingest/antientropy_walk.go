package ingest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The anti-entropy walk: when it runs (Run), a full pass (Pass), the next
// page of the walk workers share (Step), and the lock that lets one worker
// at a time compare a page.

// Run walks the store a page every Interval until ctx is done, and makes a
// full pass at once after a Redis topology change (a failover) or Trigger.
// A full pass that fails (the cluster still settling) is tried again every
// Interval until one succeeds.
func (a *AntiEntropy) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	urgent := false
	// Failures are logged when they start and when they end, not on every
	// try: Redis or Postgres being down is reported elsewhere too.
	failing := false
	failed := func(err error) {
		if ctx.Err() == nil && !failing {
			a.log.Warn("anti-entropy cannot run; trying again every interval", "err", err, "interval", a.cfg.Interval.String())
		}
		failing = true
	}
	recovered := func() {
		if failing {
			a.log.Info("anti-entropy runs again")
		}
		failing = false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.cache.TopologyChanged():
			a.log.Info("redis topology changed: anti-entropy pass starts")
			urgent = true
		case <-a.trigger:
			urgent = true
		case <-t.C:
		}
		if urgent {
			st, err := a.Pass(ctx)
			if err != nil {
				failed(err)
				continue
			}
			recovered()
			urgent = false
			a.log.Info("anti-entropy pass done", "checked", st.Checked, "repaired_events", st.Events,
				"repaired_listings", st.Listings, "repaired_markets", st.Markets, "repaired_trade_lists", st.TradeLists)
			continue
		}
		if _, err := a.Step(ctx); err != nil {
			failed(err)
		} else {
			recovered()
		}
	}
}

// Pass compares every document, from the first, and repairs what is behind.
func (a *AntiEntropy) Pass(ctx context.Context) (PassStats, error) {
	var total PassStats
	started := time.Now()
	after := ""
	for {
		var (
			st   PassStats
			next string
			done bool
		)
		ran, err := a.withLock(ctx, func() error {
			var err error
			st, next, done, err = a.comparePage(ctx, after)
			return err
		})
		if errors.Is(err, errIncomplete) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if !ran {
			// Another worker holds the lock for a moment: wait for it.
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		total.add(st)
		if done {
			a.passDone(started)
			return total, nil
		}
		after = next
	}
}

// Step compares the next page of the walk that workers share, under the
// lock; when another worker holds it, Step does nothing. The shared
// position is "<walk start, unix ns>|<last document name>"; it is read and
// written while the lock is held, so no two workers compare the same page
// and the position never moves backwards.
func (a *AntiEntropy) Step(ctx context.Context) (PassStats, error) {
	var st PassStats
	_, err := a.withLock(ctx, func() error {
		pos, err := a.cache.Cursor(ctx, lockName)
		if err != nil {
			return err
		}
		startNS, after, ok := strings.Cut(pos, "|")
		started, perr := strconv.ParseInt(startNS, 10, 64)
		if !ok || perr != nil {
			started, after = time.Now().UnixNano(), ""
		}
		var (
			next string
			done bool
		)
		st, next, done, err = a.comparePage(ctx, after)
		if err != nil {
			return err
		}
		if done {
			a.passDone(time.Unix(0, started))
			return a.cache.SetCursor(ctx, lockName, "")
		}
		return a.cache.SetCursor(ctx, lockName, strconv.FormatInt(started, 10)+"|"+next)
	})
	if errors.Is(err, errIncomplete) {
		return st, nil
	}
	return st, err
}

func (a *AntiEntropy) passDone(started time.Time) {
	if a.metrics != nil {
		a.metrics.PassSeconds.Observe(time.Since(started).Seconds())
		a.metrics.LastPass.SetToCurrentTime()
	}
}

// errIncomplete means Redis lost everything (it does not hold the whole
// listing): the rebuild (EnsureComplete) repairs that, not this pass.
var errIncomplete = errors.New("ingest: anti-entropy: redis does not hold the whole listing")

// withLock runs fn while this worker holds the anti-entropy lock. It
// reports ran=false, without calling fn, when another worker holds it, and
// errIncomplete when Redis does not hold the whole listing.
func (a *AntiEntropy) withLock(ctx context.Context, fn func() error) (ran bool, err error) {
	complete, err := a.cache.ListingComplete(ctx)
	if err != nil {
		return false, err
	}
	if !complete {
		return false, errIncomplete
	}
	release, ok, err := a.cache.TryLock(ctx, lockName, a.token, lockTTL)
	if err != nil || !ok {
		return false, err
	}
	defer release()
	return true, fn()
}
