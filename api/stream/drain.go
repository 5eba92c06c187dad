package stream

import (
	"context"

	"github.com/marketdata/marketdata/internal/batch"
)

// The hub's two drain loops: each waits for one request, then takes what
// else waits, up to one read's worth (batch.Collect), so that under load
// one read serves many.

// maxRead is how many markets one fallback read asks for.
const maxRead = 500

// readLoop reads the markets noticed without their items and fans them
// out: a newer version than the workers handed out wins either way
// (fanOut keeps a market's revisions increasing).
func (h *Hub) readLoop(ctx context.Context) {
	ids := make([]string, 0, maxRead)
	at := map[string]int64{}
	add := func(c change) bool {
		for _, id := range c.ids {
			if _, ok := at[id]; !ok {
				at[id] = c.at
				ids = append(ids, id)
			}
		}
		return len(ids) < maxRead
	}
	for batch.Collect(ctx.Done(), h.changes, add) {
		h.readAndFanOut(ctx, ids, at)
		ids = ids[:0]
		clear(at)
	}
}

// maxShared bounds the ids one shared read of current prices takes.
const maxShared = 10 * maxRead

// currentLoop reads, together, the current prices that subscribes arriving
// at once ask for (readShared).
func (h *Hub) currentLoop(ctx context.Context) {
	var reads []*currentRead
	n := 0
	add := func(r *currentRead) bool {
		reads = append(reads, r)
		n += len(r.ids)
		return n < maxShared
	}
	for batch.Collect(ctx.Done(), h.reads, add) {
		h.readShared(ctx, reads)
		reads, n = nil, 0
	}
}
