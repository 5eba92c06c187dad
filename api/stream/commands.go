package stream

import (
	"context"
	"hash/maphash"
	"strconv"
)

// handle runs a command, and returns the read it waits for and what of it
// remains to be done once that read is done (nil: nothing).
func (c *Conn) handle(ctx context.Context, data []byte) (*pendingCurrent, func()) {
	cmd, err := ParseCommand(data)
	if err != nil {
		c.hub.m.commandErrors.Inc()
		c.sendError("invalid_request", err.Error())
		return nil, nil
	}
	switch cmd.Op {
	case OpSubscribe:
		return c.subscribe(ctx, cmd.MarketIDs)
	case OpUnsubscribe:
		c.unsubscribe(cmd.MarketIDs)
	}
	return nil, nil
}

// subscribe registers ids (so no change is missed from now on) and starts
// reading their current prices; what it returns waits for them, then
// acknowledges and queues those prices after the ack. A market not served
// is in missing and not subscribed.
func (c *Conn) subscribe(ctx context.Context, ids []string) (*pendingCurrent, func()) {
	c.mu.Lock()
	var fresh []*sub
	for _, id := range ids {
		if c.subs[id] == nil {
			fresh = append(fresh, &sub{c: c, id: id})
		}
	}
	if n := len(c.subs) + len(fresh); n > MaxMarkets {
		c.mu.Unlock()
		c.sendError("invalid_request", "this subscribe would make "+strconv.Itoa(n)+
			" markets subscribed on this connection: at most "+strconv.Itoa(MaxMarkets)+"; nothing was subscribed")
		return nil, nil
	}
	for _, st := range fresh {
		c.subs[st.id] = st
	}
	c.mu.Unlock()
	c.hub.subscribe(fresh)
	p := c.hub.beginCurrent(ctx, ids)
	return p, func() { c.subscribed(ids, fresh, p) }
}

// subscribed finishes a subscribe once its current prices are read.
func (c *Conn) subscribed(ids []string, fresh []*sub, p *pendingCurrent) {
	items, err := p.wait()
	if err != nil {
		c.mu.Lock()
		for _, st := range fresh {
			c.drop(st)
		}
		c.mu.Unlock()
		c.hub.unsubscribe(fresh)
		c.sendError("unavailable", "prices cannot be read right now; nothing was subscribed: subscribe again")
		return
	}
	var accepted, missing []string
	for i, id := range ids {
		if !items[i].Found || !items[i].Served {
			missing = append(missing, id)
			continue
		}
		accepted = append(accepted, id)
	}
	c.mu.Lock()
	if c.state() >= stateEnded {
		c.mu.Unlock()
		return
	}
	var gone []*sub
	for _, id := range missing {
		if st := c.subs[id]; st != nil {
			c.drop(st)
			gone = append(gone, st)
		}
	}
	c.pushControl(outMsg{"subscribed", subscribedRest(accepted, missing)})
	for i, id := range ids {
		st := c.subs[id]
		if st == nil {
			continue
		}
		st.ack()
		// The snapshot: the current price, unless a newer one came through
		// a notice meanwhile (then that one is the current price).
		if it := items[i]; it.Body != nil && it.Rev >= st.rev {
			st.rev, st.sum = it.Rev, maphash.Bytes(c.hub.seed, it.Body)
			c.queuePrice(st, it.Body, 0)
		}
	}
	c.kick()
	c.mu.Unlock()
	// Markets subscribed before and missing now are dropped too.
	c.hub.unsubscribe(gone)
}

// drop ends a subscription on the connection's side; c.mu is held. The
// caller takes it out of the hub.
func (c *Conn) drop(st *sub) {
	st.remove()
	st.pending, st.body = false, nil
	delete(c.subs, st.id)
}

// unsubscribe drops ids; nothing more is written for them after the ack.
func (c *Conn) unsubscribe(ids []string) {
	c.mu.Lock()
	var gone []*sub
	for _, id := range ids {
		if st := c.subs[id]; st != nil {
			c.drop(st)
			gone = append(gone, st)
		}
	}
	c.pushControl(outMsg{"unsubscribed", unsubscribedRest(ids)})
	c.mu.Unlock()
	c.hub.unsubscribe(gone)
}

func (c *Conn) sendError(code, message string) {
	c.mu.Lock()
	c.pushControl(outMsg{"error", errorRest(code, message)})
	c.mu.Unlock()
}
