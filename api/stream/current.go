package stream

import (
	"context"

	"github.com/marketdata/marketdata/cache"
)

// pendingCurrent is a read of current prices begun (beginCurrent): what the topics answered, and the
// shared read of the rest under way.
type pendingCurrent struct {
	h      *Hub
	ids    []string
	items  []cache.PriceItem
	at     []int // indexes of ids the read answers
	r      *currentRead
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// beginCurrent begins reading the current price of each of ids for a
// subscribe (whose subscriptions are in the hub already); await and wait
// finish it. A market the hub has fanned out is answered from the topic
// without a read: the topic holds the newest revision fanned out, and
// whatever is newer reaches the new subscription through the fan-out like
// every other (a notice in flight, or the resync after a lost one). The
// others go to the shared reads (currentLoop), and a read older than the
// topic's item (Redis lost the write with a failed master, or the read
// raced the fan-out) gives way to it. A subscribe begins on the goroutine
// that read its command and waits on the connection's own, whose stack
// stays small (Conn.Serve). Subscribes that arrive together share one
// read: 5,000 clients reconnecting at once, each subscribing to 20 markets
// of the same 2,000, cost 2,000 items read in batches of 500, not 100,000
// (and not a Redis budget missed and a Postgres query per subscribe).
func (h *Hub) beginCurrent(ctx context.Context, ids []string) *pendingCurrent {
	p := &pendingCurrent{h: h, ids: ids, items: make([]cache.PriceItem, len(ids))}
	var read []string
	for i, id := range ids {
		if rev, body := h.newest(id); body != nil {
			p.items[i] = cache.PriceItem{Found: true, Served: true, Body: body, Rev: rev}
		} else {
			read, p.at = append(read, id), append(p.at, i)
		}
	}
	if len(read) == 0 {
		return p
	}
	p.ctx, p.cancel = context.WithTimeout(ctx, h.cfg.ReadTimeout)
	r := &currentRead{ids: read, done: make(chan struct{})}
	select {
	case h.reads <- r:
		p.r = r
	case <-p.ctx.Done():
		p.err = p.ctx.Err()
	}
	return p
}

// await returns once the read is done, its time is up or quit is closed
// (the connection closes): wait then does not block.
func (p *pendingCurrent) await(quit <-chan struct{}) {
	if p.r == nil {
		return
	}
	select {
	case <-p.r.done:
	case <-p.ctx.Done():
	case <-quit:
		p.cancel() // wait gives up
	}
}

// wait completes a read begun (beginCurrent).
func (p *pendingCurrent) wait() ([]cache.PriceItem, error) {
	if p.cancel != nil {
		defer p.cancel()
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.r == nil {
		return p.items, nil
	}
	select {
	case <-p.r.done:
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	if p.r.err != nil {
		return nil, p.r.err
	}
	for j, i := range p.at {
		p.items[i] = p.r.items[j]
		if rev, body := p.h.newest(p.ids[i]); rev > p.r.items[j].Rev {
			p.items[i].Rev, p.items[i].Body = rev, body
		}
	}
	return p.items, nil
}

// currentRead is one subscribe's read of its markets' current prices.
type currentRead struct {
	ids   []string
	items []cache.PriceItem
	err   error
	done  chan struct{}
}

// readShared reads the markets of batch once each and answers every read.
func (h *Hub) readShared(ctx context.Context, batch []*currentRead) {
	seen := map[string]bool{}
	var ids []string
	for _, r := range batch {
		for _, id := range r.ids {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	got := make(map[string]cache.PriceItem, len(ids))
	var failed error
	for len(ids) > 0 && failed == nil {
		chunk := ids[:min(len(ids), maxRead)]
		ids = ids[len(chunk):]
		rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
		items, err := h.src.Prices(rctx, chunk)
		cancel()
		if err != nil {
			failed = err
			break
		}
		for i, id := range chunk {
			got[id] = items[i]
		}
	}
	for _, r := range batch {
		if failed != nil {
			r.err = failed
		} else {
			r.items = make([]cache.PriceItem, len(r.ids))
			for i, id := range r.ids {
				r.items[i] = got[id]
			}
		}
		close(r.done)
	}
}
