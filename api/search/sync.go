package search

import (
	"context"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/internal/retry"
)

// Serve loads the index, retrying with a doubling wait (0.2 s to 5 s) while
// its source does not answer, then keeps it fresh (Run every resync, and
// RunUpdates) until ctx ends. Failures are logged at the first attempt and
// then every 30 s, not once per try.
func (x *Index) Serve(ctx context.Context, resync time.Duration) {
	wait := retry.Backoff{First: 200 * time.Millisecond, Max: 5 * time.Second}
	warn := ratelog.Limiter{Every: 30 * time.Second}
	for !x.Ready() {
		err := x.Load(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		warn.Log(ctx, x.log, slog.LevelWarn, "search index not loaded; the node stays unready and retries", "err", err)
		if wait.Wait(ctx) != nil {
			return
		}
	}
	if wait.Retrying() {
		x.log.Info("search index loaded; the node is ready", "events", x.Len())
	}
	go x.Run(ctx, resync)
	go x.RunUpdates(ctx)
}

// Run resyncs the index with a full Load every period until ctx ends: the
// safety net for change notices lost on the way. It loads at once when the
// index has never loaded.
func (x *Index) Run(ctx context.Context, every time.Duration) {
	if !x.Ready() {
		x.resync(ctx)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			x.resync(ctx)
		case <-x.reload:
			x.resync(ctx)
			t.Reset(every)
		}
	}
}

// Enqueue queues ids (a change notice's events) for RunUpdates. It never
// blocks: ids queued while an Update runs are re-read together by the next,
// so notices arriving faster than Redis answers cost one read, not one
// goroutine each.
func (x *Index) Enqueue(ids []string) {
	x.pendingMu.Lock()
	for _, id := range ids {
		x.pending[id] = struct{}{}
	}
	x.pendingMu.Unlock()
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// RunUpdates re-reads queued ids until ctx ends. An Update re-reads the
// current summaries, so ids queued twice need one read. An Update that
// fails (Redis unreachable) puts its ids back and the next try waits,
// doubling from retryMin to retryMax.
func (x *Index) RunUpdates(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.kick:
		}
		x.pendingMu.Lock()
		ids := make([]string, 0, len(x.pending))
		for id := range x.pending {
			ids = append(ids, id)
		}
		clear(x.pending)
		x.pendingMu.Unlock()
		err := x.Update(ctx, ids)
		if err == nil || ctx.Err() != nil {
			wait = 0
			continue
		}
		wait = min(max(2*wait, retryMin), retryMax)
		x.log.Warn("search index update failed; retrying", "events", len(ids), "retry_in", wait.String(), "err", err)
		x.Enqueue(ids)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// The waits between failed search updates.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// RequestReload asks Run for a full Load as soon as it can (a flush
// notice: the cache was rebuilt). It never blocks; many requests before
// Run takes one make one Load.
func (x *Index) RequestReload() {
	select {
	case x.reload <- struct{}{}:
	default:
	}
}

func (x *Index) resync(ctx context.Context) {
	if err := x.Load(ctx); err != nil && ctx.Err() == nil {
		x.log.Warn("search index resync failed", "err", err)
	}
}
