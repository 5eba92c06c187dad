package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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

// PresenceInterval is how often a node announces itself: a node that
// stopped is no longer counted within 3 intervals (6 s).
const PresenceInterval = 2 * time.Second

// NewPresence returns a presence for node id announcing itself every
// interval on subject (notice.PresenceSubject; every node must use the
// same); Run starts it. It refuses an empty subject or id and an interval
// that is not positive.
func NewPresence(nc *nats.Conn, subject, id string, interval time.Duration) (*Presence, error) {
	switch {
	case subject == "":
		return nil, errors.New("ratelimit: presence subject is empty")
	case id == "":
		return nil, errors.New("ratelimit: presence node id is empty")
	case interval <= 0:
		return nil, fmt.Errorf("ratelimit: presence interval is %s, want a positive duration", interval)
	}
	return &Presence{id: id, nc: nc, subject: subject, interval: interval, seen: map[string]time.Time{}, count: 1}, nil
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
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be closed already: nothing left to undo
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
