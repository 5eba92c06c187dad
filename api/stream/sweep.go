package stream

import (
	"context"
	"time"
)

// sweepEvery is how often connections are checked for a due ping and a
// stalled writer: well within the contract's 1 s for 4008.
const sweepEvery = 250 * time.Millisecond

func (h *Hub) sweepLoop(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var conns []*Conn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		conns = h.connList(conns[:0])
		now := time.Now().UnixNano()
		for _, c := range conns {
			c.sweep(now)
		}
		clear(conns)
	}
}

// sweep runs every sweepEvery: a ping when due, and the 4008 close of a
// writer that waited StallAfter on one message.
func (c *Conn) sweep(now int64) {
	if c.expires != 0 && now >= c.expires {
		c.Close(CloseRevoked, "the API key expired")
		return
	}
	if since := c.writingSince.Load(); since != 0 && now-since > int64(c.hub.cfg.StallAfter) {
		// The message being written still has StallGrace to complete: a
		// client that reads again then gets the 4008 close frame after
		// whole messages.
		c.closeWith(CloseStalled, "the client read nothing for "+c.hub.cfg.StallAfter.String(), c.hub.cfg.StallGrace)
		return
	}
	if now >= c.nextPing.Load() {
		c.nextPing.Store(now + int64(c.hub.cfg.PingEvery))
		c.mu.Lock()
		c.pingDue = true
		c.kick()
		c.mu.Unlock()
	}
}
