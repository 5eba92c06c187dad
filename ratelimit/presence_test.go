package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestNewPresenceRefuses: no subject, no id or no interval is refused.
func TestNewPresenceRefuses(t *testing.T) {
	for _, tc := range []struct {
		subject, id string
		interval    time.Duration
		want        string
	}{
		{"", "n1", time.Second, "subject"},
		{"s", "", time.Second, "id"},
		{"s", "n1", 0, "interval"},
		{"s", "n1", -time.Second, "interval"},
	} {
		if _, err := NewPresence(nil, tc.subject, tc.id, tc.interval); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPresence(%q, %q, %s): got %v, want an error naming the %s", tc.subject, tc.id, tc.interval, err, tc.want)
		}
	}
	if p, err := NewPresence(nil, "s", "n1", PresenceInterval); err != nil || p.Count() != 1 {
		t.Errorf("NewPresence: got %v, %v; want a presence counting this node", p, err)
	}
}

// TestPresenceCounts: two presences on one subject count each other, and a
// node that stopped announcing is no longer counted 3 intervals later.
func TestPresenceCounts(t *testing.T) {
	nc, _ := testenv.NATS(t)
	subject := testenv.Name("presence")
	const every = 50 * time.Millisecond
	a, err := NewPresence(nc, subject, "a", every)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPresence(nc, subject, "b", every)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bctx, stopB := context.WithCancel(ctx)
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.Run(ctx) }()
	go func() { bDone <- b.Run(bctx) }()
	waitCount := func(p *Presence, want int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); p.Count() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("count %d, want %d", p.Count(), want)
			}
			time.Sleep(every / 5) // polling the count
		}
	}
	waitCount(a, 2)
	waitCount(b, 2)
	stopB()
	if err := <-bDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	waitCount(a, 1)
	cancel()
	if err := <-aDone; err != nil {
		t.Errorf("Run: %v", err)
	}
}
