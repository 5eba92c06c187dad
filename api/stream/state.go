package stream

// connState is where a connection is in its life. It only moves forward,
// by the moves allows lists, under c.mu (Conn.move); the writer reads it
// without the lock too (between two writes, and after moving the write
// deadline), so it is kept in an atomic.
//
//	open ──close asked──▶ closing ──close frame written──▶ closeSent
//	open, closing or closeSent ──socket cut──▶ cut
//	any state before ended ──Serve's read stopped──▶ ended ──writer gone──▶ released
//
// Who writes, at any state, is the writer role (Conn.writing), not a state:
// it is taken and let go many times while the connection is open.
type connState uint32

const (
	// stateOpen: commands are read; acks, errors and prices are written.
	stateOpen connState = iota
	// stateClosing: a close is due (Conn.closeCode): the writer writes the
	// close frame next and nothing else; no price is taken any more.
	stateClosing
	// stateCloseSent: the writer wrote the close frame (or tried): nothing
	// more is written; the client's answer or the cut ends the read.
	stateCloseSent
	// stateCut: the socket's deadline is in the past, so every read and
	// write fails and Serve returns; a write deadline moved after the cut
	// must not undo it (Conn.startWrite).
	stateCut
	// stateEnded: Serve's read loop stopped (Conn.end): the subscriptions
	// are dropped and the writer is waited for. The socket is cut.
	stateEnded
	// stateReleased: the writer is gone and Serve returns: the server has
	// the connection back (closed or reused), so nothing may touch it.
	stateReleased
)

var connStateNames = [...]string{"open", "closing", "closeSent", "cut", "ended", "released"}

func (s connState) String() string {
	if int(s) < len(connStateNames) {
		return connStateNames[s]
	}
	return "connState(?)"
}

// allows reports whether a connection in s may move to to.
func (s connState) allows(to connState) bool {
	switch to {
	case stateClosing:
		return s == stateOpen
	case stateCloseSent:
		return s == stateClosing
	case stateCut:
		return s < stateCut
	case stateEnded:
		return s < stateEnded
	case stateReleased:
		return s == stateEnded
	}
	return false
}

// takesPrices reports whether prices are still queued and written: only
// while open (a close frame goes out after the message being written, and
// nothing else does).
func (s connState) takesPrices() bool { return s == stateOpen }

// writable reports whether a writer may still start: not once the socket
// is cut (its writes would fail).
func (s connState) writable() bool { return s < stateCut }

// state is the connection's state; without c.mu, it may move on (forward)
// right after.
func (c *Conn) state() connState { return connState(c.life.Load()) }

// move makes to the connection's state when s.allows it, and reports
// whether it did; c.mu is held.
func (c *Conn) move(to connState) bool {
	if !c.state().allows(to) {
		return false
	}
	c.life.Store(uint32(to))
	return true
}

// subState is where one subscription is in its life: new until its
// subscribe is acknowledged (its prices wait until then), acked, removed
// when unsubscribed or when the connection ended (the hub may still hold
// it for a moment). It moves under c.mu, forward only.
type subState uint8

const (
	subNew subState = iota
	subAcked
	subRemoved
)

// ack marks the subscription acknowledged; c.mu is held. A removed one
// stays removed.
func (st *sub) ack() {
	if st.state == subNew {
		st.state = subAcked
	}
}

// remove marks the subscription removed; c.mu is held.
func (st *sub) remove() {
	st.state = subRemoved
}
