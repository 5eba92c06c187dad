package stream

// The bound on acks and errors waiting for a client that does not read.
const (
	maxControl      = 8
	maxControlBytes = 128 << 10
)

// waitRoom waits until the control messages are under their bound; false:
// the connection closed meanwhile.
func (c *Conn) waitRoom() bool {
	for {
		c.mu.Lock()
		full := len(c.control) >= maxControl || c.controlBytes >= maxControlBytes
		c.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-c.room:
		case <-c.quit:
			return false
		}
	}
}

// pushControl queues an ack or error; c.mu is held.
func (c *Conn) pushControl(m outMsg) {
	c.control = append(c.control, m)
	c.controlBytes += len(m.rest)
	c.kick()
}

// deliver takes a market's version from the hub: it replaces the one
// waiting, if any (conflation), and is dropped when the connection has
// been given this version or a newer one.
func (st *sub) deliver(rev int64, body []byte, sum uint64, at int64, f *flusher) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.state == subRemoved || rev <= st.rev || !c.state().takesPrices() {
		return
	}
	st.rev = rev
	if sum == st.sum {
		return // the bytes it has, under a newer revision
	}
	st.sum = sum
	c.queuePrice(st, body, at)
	if st.state == subAcked {
		c.claim(f)
	}
}

// queuePrice makes body the version of st waiting; c.mu is held.
func (c *Conn) queuePrice(st *sub, body []byte, at int64) {
	if st.pending {
		c.hub.m.conflated.Inc()
	} else {
		st.pending = true
		c.order = append(c.order, st)
	}
	st.body, st.at = body, at
}
