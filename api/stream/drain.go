package stream

import "context"

// The hub's two drain loops: each waits for one request, then takes what
// else waits, up to one read's worth, so that under load one read serves
// many. The batchers of cache/trips.go and ratelimit/batcher.go have the
// same shape; these two stay apart from the code they feed so that they
// can be moved onto one shared batching queue as they are.

// maxRead is how many markets one fallback read asks for.
const maxRead = 500

// readLoop reads the markets noticed without their items and fans them
// out: a newer version than the workers handed out wins either way
// (fanOut keeps a market's revisions increasing).
func (h *Hub) readLoop(ctx context.Context) {
	ids := make([]string, 0, maxRead)
	at := map[string]int64{}
	for {
		var c change
		select {
		case <-ctx.Done():
			return
		case c = <-h.changes:
		}
		ids = ids[:0]
		clear(at)
		add := func(c change) {
			for _, id := range c.ids {
				if _, ok := at[id]; !ok {
					at[id] = c.at
					ids = append(ids, id)
				}
			}
		}
		add(c)
		// Take what else waits, up to one read's worth: under load one
		// read serves many notices.
	more:
		for len(ids) < maxRead {
			select {
			case c = <-h.changes:
				add(c)
			default:
				break more
			}
		}
		h.readAndFanOut(ctx, ids, at)
	}
}

// maxShared bounds the ids one shared read of current prices takes.
const maxShared = 10 * maxRead

func (h *Hub) currentLoop(ctx context.Context) {
	for {
		var batch []*currentRead
		select {
		case <-ctx.Done():
			return
		case r := <-h.reads:
			batch = append(batch, r)
		}
		n := len(batch[0].ids)
	more:
		for n < maxShared {
			select {
			case r := <-h.reads:
				batch = append(batch, r)
				n += len(r.ids)
			default:
				break more
			}
		}
		h.readShared(ctx, batch)
	}
}
