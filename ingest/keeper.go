package ingest

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// keeper keeps JetStream from redelivering what a live worker still holds.
// The ack wait is short so that a dead worker's messages come back soon
// (DefaultAckWait); a message a live worker holds longer — held back behind
// a batch of its market, in a formed batch waiting for an applier, in a
// batch Postgres is slow with — would meanwhile be redelivered to another
// worker and applied twice. So the collector holds every message here from
// its receipt until the message is acknowledged or handed back, and one
// goroutine per worker sends a progress ack (InProgress, which restarts the
// message's ack timer) every tick, a quarter of the ack wait, for each held
// message JetStream has not heard of for half a tick. A message is first
// progress-acked within 3/8 of the ack wait of its receipt, then every
// quarter; messages acknowledged sooner, as in steady traffic, never are.
//
// A progress ack that crosses the message's ack or nak on the wire is
// harmless: after an ack JetStream ignores it; after a nak with a delay it
// can only move the redelivery to the ack wait.
type keeper struct {
	tick time.Duration
	sent prometheus.Counter
	// now is the real clock: the ack timers it races are JetStream's.
	now func() time.Time

	mu sync.Mutex
	// told maps each held message to when JetStream last heard of it from
	// this worker: its receipt (the server's timer started at its delivery,
	// a little earlier), then each progress ack.
	told map[jetstream.Msg]time.Time
}

func newKeeper(ackWait time.Duration, sent prometheus.Counter) *keeper {
	return &keeper{tick: ackWait / 4, sent: sent, now: time.Now, told: map[jetstream.Msg]time.Time{}}
}

// hold starts keeping m, just received.
func (k *keeper) hold(m jetstream.Msg) {
	k.mu.Lock()
	k.told[m] = k.now()
	k.mu.Unlock()
}

// release stops keeping msgs, acknowledged or handed back.
func (k *keeper) release(msgs []jetstream.Msg) {
	k.mu.Lock()
	for _, m := range msgs {
		delete(k.told, m)
	}
	k.mu.Unlock()
}

// run sends progress acks every tick until done is closed.
func (k *keeper) run(done <-chan struct{}) {
	t := time.NewTicker(k.tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			k.progress()
		}
	}
}

// progress sends a progress ack for every held message JetStream has not
// heard of for half a tick, and returns how many went out.
func (k *keeper) progress() int {
	now := k.now()
	var due []jetstream.Msg
	k.mu.Lock()
	for m, at := range k.told {
		if now.Sub(at) >= k.tick/2 {
			due = append(due, m)
			k.told[m] = now
		}
	}
	k.mu.Unlock()
	n := 0
	for _, m := range due {
		// An error: the message was acknowledged or handed back meanwhile
		// (nothing is sent then), or the connection is closed. A progress
		// ack lost on the way lets the message be redelivered: harmless.
		if m.InProgress() == nil {
			n++
		}
	}
	k.sent.Add(float64(n))
	return n
}
