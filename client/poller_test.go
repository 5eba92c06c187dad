package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// TestPoller polls a watchlist of 60 markets and an unknown id (two
// chunks) on the real service: the first round hands over every price,
// an unchanged round costs two 304s and hands over nothing, a changed
// price comes alone and once, Run delivers changes until its context ends,
// and a revoked key ends Run with the 401.
func TestPoller(t *testing.T) {
	s := startService(t, nil)
	w := s.Seed("p", 30, 2)
	key := s.NewKey()
	c, rec := newClient(t, s.URL(), key.Secret)
	ctx := ctxT(t)
	var ids []string
	for _, m := range w.Markets {
		ids = append(ids, m.ID)
	}
	ids = append(ids, "p-nope", ids[7])
	p, err := c.NewPoller(ids, time.Second)
	if err != nil {
		t.Fatal(err)
	}

	got, err := p.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 60 || got[0].MarketID != ids[0] || got[59].MarketID != ids[59] {
		t.Fatalf("first round: got %d prices, want the 60 in watchlist order", len(got))
	}
	if m := p.Missing(); !slices.Equal(m, []string{"p-nope"}) {
		t.Fatalf("missing: got %v, want [p-nope]", m)
	}
	if statuses, inm := rec.take(); !slices.Equal(statuses, []int{200, 200}) || inm[0] != "" || inm[1] != "" {
		t.Fatalf("first round: got %v (If-None-Match %q), want two 200s without If-None-Match", statuses, inm)
	}

	got, err = p.Poll(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("unchanged round: got %d prices, %v; want none", len(got), err)
	}
	if statuses, inm := rec.take(); !slices.Equal(statuses, []int{304, 304}) || inm[0] == "" || inm[1] == "" {
		t.Fatalf("unchanged round: got %v (If-None-Match %q), want two 304s", statuses, inm)
	}

	changed := &servicetest.Price{MarketID: ids[55], Quotes: map[string]servicetest.Quote{"venue_d": {Bid: 0.61, Ask: 0.63, Last: 0.62}}}
	s.PutPrice(changed)
	got, err = p.Poll(ctx)
	if err != nil || len(got) != 1 || got[0].MarketID != ids[55] || got[0].Version != changed.Version {
		t.Fatalf("one change: got %+v %v, want %s at version %d", got, err, ids[55], changed.Version)
	}
	statuses, _ := rec.take()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{200, 304}) {
		t.Fatalf("one change: got %v, want one 304 and one 200", statuses)
	}
	// The next round sends back the tags of the answers it holds, the
	// changed chunk's new one included: each names the position its answer
	// showed ("<hash>-<position>"), so no node answers it with an older
	// version (contract §2 "Freshness and order").
	if got, err = p.Poll(ctx); err != nil || len(got) != 0 {
		t.Fatalf("round after the change: got %d prices, %v; want none", len(got), err)
	}
	if statuses, inm := rec.take(); !slices.Equal(statuses, []int{304, 304}) ||
		!strings.Contains(inm[0], "-") || !strings.Contains(inm[1], "-") {
		t.Fatalf("round after the change: got %v (If-None-Match %q), want two 304s to tags naming positions", statuses, inm)
	}

	// Run: a change published while it runs is handed over.
	runCtx, cancel := context.WithCancel(ctx)
	updates := make(chan []client.Price, 10)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, func(ps []client.Price) { updates <- ps }) }()
	next := &servicetest.Price{MarketID: ids[3], Quotes: map[string]servicetest.Quote{"venue_a": {Bid: 0.2, Ask: 0.3, Last: 0.25}}}
	s.PublishPrice(next)
	select {
	case ps := <-updates:
		if len(ps) != 1 || ps[0].MarketID != ids[3] || ps[0].Version != next.Version {
			t.Fatalf("Run: got %+v, want %s at version %d", ps, ids[3], next.Version)
		}
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("Run handed over no change within 60 s")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: got %v, want context.Canceled", err)
	}
	if len(updates) != 0 {
		t.Fatalf("Run handed over %d more rounds for one change", len(updates))
	}

	// Revocation takes effect within 1 s: Run sees 304s until then, and
	// then the 401.
	s.RevokeKey(key.KeyID)
	err = p.Run(ctx, func([]client.Price) { t.Error("a revoked key's poller handed over prices") })
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("Run with a revoked key: got %v, want the 401", err)
	}

	if _, err := c.NewPoller(nil, time.Second); err == nil {
		t.Fatal("NewPoller without ids: no error")
	}
	if _, err := c.NewPoller(ids, time.Millisecond); err == nil {
		t.Fatal("NewPoller at 1 ms: no error")
	}
}
