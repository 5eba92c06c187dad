package stream

import "testing"

// The moves a connection's state may make, and no other: forward only,
// the close frame only after a close was asked, released only after the
// read ended.
func TestConnStateMoves(t *testing.T) {
	all := []connState{stateOpen, stateClosing, stateCloseSent, stateCut, stateEnded, stateReleased}
	allowed := map[[2]connState]bool{
		{stateOpen, stateClosing}:      true,
		{stateClosing, stateCloseSent}: true,
		{stateOpen, stateCut}:          true,
		{stateClosing, stateCut}:       true,
		{stateCloseSent, stateCut}:     true,
		{stateOpen, stateEnded}:        true,
		{stateClosing, stateEnded}:     true,
		{stateCloseSent, stateEnded}:   true,
		{stateCut, stateEnded}:         true,
		{stateEnded, stateReleased}:    true,
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.allows(to), allowed[[2]connState{from, to}]; got != want {
				t.Errorf("%s → %s allowed: %v, want %v", from, to, got, want)
			}
		}
	}
	if got := connState(len(all)).String(); got != "connState(?)" {
		t.Errorf("an unknown state's name: %q", got)
	}
}

// A connection takes prices only while open, and a writer may start until
// the socket is cut; a refused move leaves the state as it was.
func TestConnStateQuestions(t *testing.T) {
	for _, c := range []struct {
		s                     connState
		takesPrices, writable bool
	}{
		{stateOpen, true, true},
		{stateClosing, false, true},
		{stateCloseSent, false, true},
		{stateCut, false, false},
		{stateEnded, false, false},
		{stateReleased, false, false},
	} {
		if got := c.s.takesPrices(); got != c.takesPrices {
			t.Errorf("%s takesPrices: %v, want %v", c.s, got, c.takesPrices)
		}
		if got := c.s.writable(); got != c.writable {
			t.Errorf("%s writable: %v, want %v", c.s, got, c.writable)
		}
	}
	var c Conn
	if c.move(stateReleased) || c.state() != stateOpen {
		t.Fatalf("open → released moved: %s", c.state())
	}
	if !c.move(stateClosing) || c.move(stateClosing) || c.state() != stateClosing {
		t.Fatalf("open → closing twice: %s", c.state())
	}
	st := &sub{}
	st.ack()
	st.remove()
	st.ack()
	if st.state != subRemoved {
		t.Fatalf("a removed subscription acked: %d", st.state)
	}
}
