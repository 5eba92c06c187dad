package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// heldMsg is a delivered message that counts its progress acks and refuses
// them once acknowledged, as nats.go does.
type heldMsg struct {
	jetstream.Msg
	progressed int
	acked      bool
}

func (m *heldMsg) InProgress() error {
	if m.acked {
		return jetstream.ErrMsgAlreadyAckd
	}
	m.progressed++
	return nil
}

// clock is a settable time for the keeper.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestKeeper(ackWait time.Duration) (*keeper, *clock, prometheus.Counter) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	sent := prometheus.NewCounter(prometheus.CounterOpts{Name: "sent"})
	k := newKeeper(ackWait, sent)
	k.now = c.now
	return k, c, sent
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestKeeperFirstProgress: wherever a message arrives between two ticks,
// its first progress ack goes out between an eighth and 3/8 of the ack
// wait after its receipt, and then every tick (a quarter): JetStream, which
// redelivers after a whole ack wait without word, never gets the chance.
func TestKeeperFirstProgress(t *testing.T) {
	const ackWait = 4 * time.Second
	tick := ackWait / 4
	for _, frac := range []float64{0, 0.1, 0.49, 0.5, 0.51, 0.9, 0.999} {
		t.Run(fmt.Sprint(frac), func(t *testing.T) {
			k, c, _ := newTestKeeper(ackWait)
			start := c.t
			received := start.Add(time.Duration(frac * float64(tick)))
			c.t = received
			m := &heldMsg{}
			k.hold(m)
			var acks []time.Time
			for i := 1; i <= 8; i++ {
				c.t = start.Add(time.Duration(i) * tick)
				before := m.progressed
				k.progress()
				if m.progressed > before {
					acks = append(acks, c.t)
				}
			}
			if len(acks) == 0 {
				t.Fatal("no progress ack in 8 ticks")
			}
			if first := acks[0].Sub(received); first < ackWait/8 || first > ackWait*3/8 {
				t.Errorf("first progress ack %s after receipt, want between %s and %s", first, ackWait/8, ackWait*3/8)
			}
			for i := 1; i < len(acks); i++ {
				if gap := acks[i].Sub(acks[i-1]); gap != tick {
					t.Errorf("progress acks %s apart, want every tick (%s)", gap, tick)
				}
			}
		})
	}
}

// TestKeeperOnlyHeld: only messages still held, received at least an
// eighth of the ack wait ago and not acknowledged get progress acks, and
// the counter counts the acks sent.
func TestKeeperOnlyHeld(t *testing.T) {
	k, c, sent := newTestKeeper(4 * time.Second) // tick 1 s
	start := c.t
	old, young, released, acked := &heldMsg{}, &heldMsg{}, &heldMsg{}, &heldMsg{}
	for _, m := range []*heldMsg{old, released, acked} {
		k.hold(m)
	}
	c.t = start.Add(700 * time.Millisecond)
	k.hold(young)
	k.release([]jetstream.Msg{released})
	acked.acked = true
	c.t = start.Add(time.Second)
	if got := k.progress(); got != 1 {
		t.Errorf("progress acks sent: got %d, want 1", got)
	}
	want := map[string]struct {
		m    *heldMsg
		want int
	}{"old": {old, 1}, "young (300 ms)": {young, 0}, "released": {released, 0}, "acknowledged": {acked, 0}}
	for name, w := range want {
		if w.m.progressed != w.want {
			t.Errorf("%s: %d progress acks, want %d", name, w.m.progressed, w.want)
		}
	}
	if got := counterValue(t, sent); got != 1 {
		t.Errorf("counter: got %v, want 1", got)
	}
}
