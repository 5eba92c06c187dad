package cache

import (
	"context"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/store"
)

// repair writes documents read from the store back to Redis, in the
// background: the answer does not wait for it. Callers repair only what
// Redis answered as missing: when Redis did not answer at all, a repair
// would only wait on the dead server again. At most Repairs run at once
// (Redis slow or gone: the next read repairs); failures are logged at most
// once per 10 s. A repair is a cache write like any other: it takes a change
// number and announces it (Publish), so that every node's memory follows.
func (r *Reader) repair(events []store.EventDoc, markets []store.MarketDoc, trades []store.Trade) {
	if len(events)+len(markets)+len(trades) == 0 {
		return
	}
	select {
	case r.repairs <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-r.repairs }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := r.cache.ApplyDocs(ctx, events, markets, trades)
		if err != nil {
			r.repairWarn.Log(ctx, r.log, slog.LevelWarn, "cache repair failed", "err", err)
		}
		if n.Seq == 0 || r.publish == nil {
			return
		}
		// Announced even after an error: part of it may have been written.
		if err := r.publish(n); err != nil {
			r.repairWarn.Log(ctx, r.log, slog.LevelWarn, "cache repair notice not published", "err", err)
		}
	}()
}
