package api

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/notice"
)

// Presence counts the live API nodes: each node announces itself every
// Interval on a NATS subject and counts the nodes heard within 3 intervals.
// The rate limiter's per-node fallback divides an account's limit by it.
type Presence struct {
	id       string
	nc       *nats.Conn
	subject  string
	interval time.Duration

	mu    sync.Mutex
	seen  map[string]time.Time
	count int
}

// NewPresence returns a presence for node id; Run starts it.
func NewPresence(nc *nats.Conn, subject, id string, interval time.Duration) *Presence {
	if subject == "" {
		subject = notice.PresenceSubject
	}
	return &Presence{id: id, nc: nc, subject: subject, interval: interval, seen: map[string]time.Time{}, count: 1}
}

// Count is the number of live nodes, this one included; it keeps its last
// value while NATS is unreachable.
func (p *Presence) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Run announces and listens until ctx is done.
func (p *Presence) Run(ctx context.Context) error {
	sub, err := p.nc.Subscribe(p.subject, func(m *nats.Msg) {
		p.mu.Lock()
		p.seen[string(m.Data)] = time.Now()
		p.mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe() //nolint:errcheck
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.nc.Publish(p.subject, []byte(p.id)) //nolint:errcheck // best effort; the count keeps its last value
		p.tally()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Presence) tally() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc.Status() != nats.CONNECTED {
		return
	}
	n := 0
	for id, at := range p.seen {
		if time.Since(at) > 3*p.interval {
			delete(p.seen, id)
			continue
		}
		if id != p.id {
			n++
		}
	}
	p.count = n + 1
}
