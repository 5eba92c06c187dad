package stream

import (
	"context"
	"time"
)

func (h *Hub) requestResync() {
	select {
	case h.resync <- struct{}{}:
	default:
	}
}

// minResyncGap spaces resyncs that were asked for (a flush, a failed read,
// a full queue): while reads fail fast (Redis and Postgres both refusing),
// a resync per failure would spin.
const minResyncGap = 250 * time.Millisecond

func (h *Hub) resyncLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.resync:
		}
		ids := h.subscribed()
		h.m.resyncs.Inc()
		h.readAndFanOut(ctx, ids, nil)
		// A request made while this one ran (its own failures included)
		// waits for the gap.
		select {
		case <-ctx.Done():
			return
		case <-time.After(minResyncGap):
		}
	}
}

// subscribed lists every market some connection here subscribes to.
func (h *Hub) subscribed() []string {
	var ids []string
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.RLock()
		for id := range s.topics {
			ids = append(ids, id)
		}
		s.mu.RUnlock()
	}
	return ids
}
