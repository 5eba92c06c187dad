package client_test

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// world is a service with a seeded world: 23 events (w-e001 … w-e023) of 3
// markets each with prices, a resolved market on w-e001, trades on
// w-e001-m1 and an event merged into w-e002.
type world struct {
	s   *servicetest.Service
	w   *servicetest.World
	key servicetest.Key
}

func newWorld(t *testing.T) *world {
	t.Helper()
	s := startService(t, nil)
	w := s.Seed("w", 23, 3)
	s.PutMarket(&servicetest.Market{ID: "w-e001-r1", EventID: "w-e001", Title: "Resolved market", Status: "resolved",
		Venues: map[string]string{"venue_a": "A-r1", "venue_c": "C-r1"}, Result: "yes"})
	for i := range 3 {
		s.PutTrade(&servicetest.Trade{MarketID: "w-e001-m1", TradeID: fmt.Sprintf("t%d", i+1), Venue: servicetest.Venues[i],
			Price: 0.5 + float64(i)/100, Size: float64(i + 1), Side: []string{"buy", "sell"}[i%2],
			TS: time.Date(2026, 11, 24, 9, 0, i, 0, time.UTC)})
	}
	s.PutEvent(&servicetest.Event{ID: "w-merged", Status: "merged", MergedInto: "w-e002", Venues: [4]string{"am", "bm", "", ""}})
	// Match metadata: w-e002 and its market w-e002-c1, whose venue_b is a
	// complement venue (its quote and trade are shown inverted).
	e2 := w.Events[1]
	e2.Version, e2.UpdatedAt, e2.Matches = 0, time.Time{}, map[string]servicetest.Match{
		"venue_a": {Relation: "identity", Confidence: 0.97, Method: "rules"}, "venue_b": {Relation: "complement", Confidence: 0.8, Method: "model"}}
	s.PutEvent(e2)
	s.PutMarket(&servicetest.Market{ID: "w-e002-c1", EventID: "w-e002", Venues: map[string]string{"venue_a": "A-c1", "venue_b": "b-c1"},
		Matches: map[string]servicetest.Match{"venue_b": {Relation: "complement", Confidence: 0.9, Method: "manual"}}})
	s.PutPrice(&servicetest.Price{MarketID: "w-e002-c1", Quotes: map[string]servicetest.Quote{
		"venue_a": {Bid: 0.3, Ask: 0.34, Last: 0.32, Volume24h: 10}, "venue_b": {Bid: 0.62, Ask: 0.7, Last: 0.65, Volume24h: 20}}})
	s.PutTrade(&servicetest.Trade{MarketID: "w-e002-c1", TradeID: "c1", Venue: "venue_b", Price: 0.7, Size: 1,
		TS: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)})
	return &world{s: s, w: w, key: s.NewKey()}
}

// TestRoutes reads every route through the client from the real service
// and checks the answers against the world published.
func TestRoutes(t *testing.T) {
	wd := newWorld(t)
	c, rec := newClient(t, wd.s.URL(), wd.key.Secret)
	ctx := ctxT(t)

	t.Run("key", func(t *testing.T) {
		k, err := c.Key(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k.KeyID != wd.key.KeyID || k.AccountID != wd.key.AccountID || k.Last4 != wd.key.Last4 || k.Limit != 1000000 || k.WindowS != 60 {
			t.Fatalf("key: got %+v, want key %s of account %s, limit 1000000 per 60 s", k, wd.key.KeyID, wd.key.AccountID)
		}
		if !slices.Equal(k.Scopes, servicetest.AllScopes) || !k.ExpiresAt.After(k.CreatedAt) {
			t.Fatalf("key scopes/times: got %+v", k)
		}
		rl, ok := c.RateLimit()
		if !ok || rl.Limit != 1000000 || rl.Remaining >= rl.Limit || rl.Remaining <= 0 {
			t.Fatalf("RateLimit after a call: got %+v %v", rl, ok)
		}
	})

	t.Run("events walk", func(t *testing.T) {
		rec.take()
		var got []string
		for ev, err := range c.Events(ctx, client.EventsFilter{Limit: 5}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.UniversalID)
		}
		var want []string
		for _, e := range wd.w.Events {
			want = append(want, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("walk: got %v, want %v", got, want)
		}
		if statuses, _ := rec.take(); len(statuses) != 5 {
			t.Fatalf("walk of 23 events by 5: got %d requests, want 5", len(statuses))
		}
	})

	t.Run("events filters", func(t *testing.T) {
		count := func(f client.EventsFilter, keep func(i int) bool) {
			t.Helper()
			var got, want []string
			for ev, err := range c.Events(ctx, f) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.UniversalID)
			}
			for i, e := range wd.w.Events {
				if keep(i + 1) {
					want = append(want, e.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%+v: got %v, want %v", f, got, want)
			}
		}
		count(client.EventsFilter{Category: "politics", Limit: 4}, func(i int) bool { return i%2 == 0 })
		count(client.EventsFilter{Venue: client.VenueD, Limit: 3}, func(i int) bool { return i%3 == 0 })
		count(client.EventsFilter{MinVenues: 4}, func(i int) bool { return i%6 == 0 })
		count(client.EventsFilter{Category: "sports", MinVenues: 3, Limit: 1}, func(i int) bool { return i%2 == 1 && i%3 == 0 })
	})

	t.Run("events break", func(t *testing.T) {
		rec.take()
		n := 0
		for _, err := range c.Events(ctx, client.EventsFilter{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 3 {
				break
			}
		}
		if statuses, _ := rec.take(); len(statuses) != 2 {
			t.Fatalf("3 events of pages of 2, then break: got %d requests, want 2", len(statuses))
		}
	})

	t.Run("events error", func(t *testing.T) {
		var errs []error
		for ev, err := range c.Events(ctx, client.EventsFilter{Venue: "venue_x"}) {
			if err == nil {
				t.Fatalf("unknown venue: got event %s, want an error", ev.UniversalID)
			}
			errs = append(errs, err)
		}
		var apiErr *client.Error
		if len(errs) != 1 || !errors.As(errs[0], &apiErr) || apiErr.Status != 422 || apiErr.Code != "invalid_request" {
			t.Fatalf("unknown venue: got %v, want one 422 invalid_request", errs)
		}
	})

	t.Run("venue index", func(t *testing.T) {
		index, err := c.VenueIndex(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[client.VenueKey]string{}
		for _, e := range wd.w.Events {
			for i, id := range e.Venues {
				if id != "" {
					want[client.VenueKey{Venue: client.Venues[i], ID: id}] = e.ID
				}
			}
		}
		if len(index) != len(want) {
			t.Fatalf("index: got %d entries, want %d", len(index), len(want))
		}
		for k, v := range want {
			if index[k] != v {
				t.Fatalf("index[%v]: got %q, want %q", k, index[k], v)
			}
		}
	})

	t.Run("event", func(t *testing.T) {
		ev, err := c.Event(ctx, "w-e001")
		if err != nil {
			t.Fatal(err)
		}
		if ev.UniversalID != "w-e001" || ev.Status != "active" || len(ev.Markets) != 3 || len(ev.RecentlyResolved) != 1 {
			t.Fatalf("event: got %+v, want w-e001 with 3 markets and 1 resolved", ev)
		}
		r := ev.RecentlyResolved[0]
		if r.UniversalID != "w-e001-r1" || r.Status != "resolved" || r.ResolvedAt == nil || r.Result != "yes" || r.Venues["venue_c"] != "C-r1" {
			t.Fatalf("resolved market: got %+v", r)
		}
		if m := ev.Markets[0]; m.ResolvedAt != nil || m.Result != "" || m.Venues["venue_a"] != "A-w-e001-m1" {
			t.Fatalf("active market: got %+v", m)
		}
		ids := ev.VenueIDs()
		if len(ids) != 2 || ids[client.VenueA] != "A-w-e001" || ev.VenueCount != 2 {
			t.Fatalf("venue ids: got %v (count %d)", ids, ev.VenueCount)
		}
	})

	t.Run("matches", func(t *testing.T) {
		ev, err := c.Event(ctx, "w-e002")
		if err != nil {
			t.Fatal(err)
		}
		// w-e002 has ids on venue_a, venue_b and venue_c; no metadata on venue_c.
		m := ev.Matches
		if _, hasC := m[client.VenueC]; len(m) != 3 || !hasC || m[client.VenueC] != nil || m[client.VenueA] == nil || *m[client.VenueA] != (client.Match{Relation: client.RelationIdentity, Confidence: 0.97, Method: "rules"}) ||
			m[client.VenueB] == nil || m[client.VenueB].Relation != client.RelationComplement {
			t.Fatalf("event matches: got %v", m)
		}
		for _, mk := range ev.Markets {
			if _, ok := mk.Matches[client.VenueA]; len(mk.Matches) != 2 || !ok {
				t.Fatalf("market %s matches: got %v, want one key per venue", mk.UniversalID, mk.Matches)
			}
			if mk.UniversalID == "w-e002-c1" && (mk.Matches[client.VenueA] != nil || mk.Matches[client.VenueB] == nil || mk.Matches[client.VenueB].Confidence != 0.9) {
				t.Fatalf("market matches: got %v", mk.Matches)
			}
		}
		snap, err := c.Snapshot(ctx, []string{"w-e002-c1"})
		if err != nil || len(snap.Data) != 1 {
			t.Fatalf("snapshot: %+v %v", snap, err)
		}
		p := snap.Data[0]
		if q := p.Quotes[client.VenueB]; !q.Inverted || *q.Bid != 0.3 || *q.Ask != 0.38 || *q.Last != 0.35 || p.Quotes[client.VenueA].Inverted {
			t.Fatalf("quotes: got %+v", p.Quotes)
		}
		if *p.BestBid != 0.3 || *p.BestAsk != 0.34 {
			t.Fatalf("best: got %v %v, want 0.3 0.34", *p.BestBid, *p.BestAsk)
		}
		tr, err := c.Trades(ctx, "w-e002-c1", 5)
		if err != nil || len(tr) != 1 || !tr[0].Inverted || tr[0].Price != 0.3 {
			t.Fatalf("trades: got %+v %v, want c1 at 0.3, inverted", tr, err)
		}
	})

	t.Run("merged event", func(t *testing.T) {
		rec.take()
		_, err := c.Event(ctx, "w-merged")
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "not_found" || apiErr.MergedInto != "w-e002" || apiErr.RequestID == "" {
			t.Fatalf("merged: got %v, want 404 not_found merged into w-e002 with a request id", err)
		}
		if statuses, _ := rec.take(); !slices.Equal(statuses, []int{404}) {
			t.Fatalf("404: got requests %v, want one (never retried)", statuses)
		}
	})

	t.Run("search", func(t *testing.T) {
		got, err := c.Search(ctx, "seeded event 1", 5)
		if err != nil {
			t.Fatal(err)
		}
		// Prefix matches by volume: w-e001 (highest), then w-e010 … w-e013.
		var ids []string
		for _, e := range got {
			ids = append(ids, e.UniversalID)
		}
		if want := []string{"w-e001", "w-e010", "w-e011", "w-e012", "w-e013"}; !slices.Equal(ids, want) {
			t.Fatalf("search: got %v, want %v", ids, want)
		}
		none, err := c.Search(ctx, "no such title", 0)
		if err != nil || none == nil || len(none) != 0 {
			t.Fatalf("search without results: got %v %v, want an empty slice", none, err)
		}
	})

	t.Run("candles", func(t *testing.T) {
		// w-e001-m1's trades t1 … t3, on venues a, b and c, in 09:00 of 2026-11-24.
		hour := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
		got, err := c.Candles(ctx, "w-e001-m1", client.CandleQuery{Interval: client.Interval1h, From: hour, To: hour.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].Start.Equal(hour) || got[0].Trades != 3 || got[0].Volume != 6 || got[0].Trade == nil ||
			*got[0].Trade.Open != 0.5 || *got[0].Trade.High != 0.52 || *got[0].Trade.Low != 0.5 || *got[0].Trade.Close != 0.52 {
			t.Fatalf("candles: got %+v", got)
		}
		b, err := c.Candles(ctx, "w-e001-m1", client.CandleQuery{Interval: client.Interval1h, From: hour, To: hour.Add(time.Hour), Venue: client.VenueB})
		if err != nil || len(b) != 1 || b[0].Trades != 1 || b[0].Volume != 2 || *b[0].Trade.Close != 0.51 {
			t.Fatalf("venue_b candles: got %+v %v", b, err)
		}
		_, err = c.Candles(ctx, "w-e001-m1", client.CandleQuery{Interval: "2h"})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 422 || !strings.Contains(apiErr.Message, "interval") {
			t.Fatalf("bad interval: got %v, want a 422 naming interval", err)
		}
		if _, err := c.Candles(ctx, "../key", client.CandleQuery{}); !errors.Is(err, client.ErrInvalidID) {
			t.Fatalf("bad id: got %v, want ErrInvalidID", err)
		}
	})

	t.Run("trades", func(t *testing.T) {
		got, err := c.Trades(ctx, "w-e001-m1", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].TradeID != "t3" || got[1].TradeID != "t2" || got[0].Venue != "venue_c" || got[0].Side != "buy" || got[0].Size != 3 {
			t.Fatalf("trades: got %+v, want t3 then t2", got)
		}
		if !got[0].TS.Equal(time.Date(2026, 11, 24, 9, 0, 2, 0, time.UTC)) {
			t.Fatalf("trade ts: got %v", got[0].TS)
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		// 69 markets, asked with duplicates and unknown ids: 2 requests.
		var ids, wantData, wantMissing []string
		for i, m := range wd.w.Markets {
			ids = append(ids, m.ID)
			wantData = append(wantData, m.ID)
			if i == 10 {
				ids = append(ids, "nope-1", wd.w.Markets[3].ID)
				wantMissing = append(wantMissing, "nope-1")
			}
		}
		ids = append(ids, "nope-2", wd.w.Markets[0].ID)
		wantMissing = append(wantMissing, "nope-2")
		rec.take()
		snap, err := c.Snapshot(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		var gotData []string
		for _, p := range snap.Data {
			gotData = append(gotData, p.MarketID)
		}
		if !slices.Equal(gotData, wantData) || !slices.Equal(snap.Missing, wantMissing) {
			t.Fatalf("snapshot: got data %v missing %v, want %v and %v", gotData, snap.Missing, wantData, wantMissing)
		}
		if statuses, _ := rec.take(); len(statuses) != 2 {
			t.Fatalf("71 unique ids: got %d requests, want 2", len(statuses))
		}
		p := snap.Data[0]
		want := wd.w.Prices[0]
		if p.Version != want.Version || p.EventID != "w-e001" || p.Status != "active" || len(p.Quotes) != 2 ||
			p.BestBid == nil || *p.BestBid != want.Quotes["venue_a"].Bid || p.BestAsk == nil || *p.BestAsk != want.Quotes["venue_b"].Ask {
			t.Fatalf("price: got %+v, want %+v", p, want)
		}
		empty, err := c.Snapshot(ctx, nil)
		if err != nil || len(empty.Data) != 0 || len(empty.Missing) != 0 {
			t.Fatalf("no ids: got %+v %v", empty, err)
		}
	})

	t.Run("snapshot of a malformed id", func(t *testing.T) {
		// Refused by the client, before any request (all-or-nothing of a
		// chunk the server fails: TestSnapshotAllOrNothing).
		ids := []string{"bad id!"}
		for _, m := range wd.w.Markets {
			ids = append(ids, m.ID)
		}
		rec.take()
		_, err := c.Snapshot(ctx, ids)
		var apiErr *client.Error
		if !errors.Is(err, client.ErrInvalidID) || errors.As(err, &apiErr) {
			t.Fatalf("a malformed id in one chunk: got %v, want ErrInvalidID", err)
		}
		if statuses, _ := rec.take(); len(statuses) != 0 {
			t.Fatalf("a malformed id: %d requests sent, want none", len(statuses))
		}
	})

	t.Run("status codes", func(t *testing.T) {
		narrow := wd.s.NewKey("account:read")
		nc, nrec := newClient(t, wd.s.URL(), narrow.Secret)
		_, err := nc.Event(ctx, "w-e001")
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 403 || apiErr.Code != "insufficient_scope" {
			t.Fatalf("no markets:read: got %v, want 403 insufficient_scope", err)
		}
		bad, brec := newClient(t, wd.s.URL(), "mdk_live_not-a-key")
		_, err = bad.Key(ctx)
		if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Code != "unauthorized" {
			t.Fatalf("bad key: got %v, want 401 unauthorized", err)
		}
		_, err = c.Trades(ctx, "w-e001-m1", 201)
		if !errors.As(err, &apiErr) || apiErr.Status != 422 {
			t.Fatalf("limit 201: got %v, want 422", err)
		}
		for name, r := range map[string]*recorder{"403": nrec, "401": brec} {
			if statuses, _ := r.take(); len(statuses) != 1 {
				t.Fatalf("%s: got requests %v, want one (never retried)", name, statuses)
			}
		}
	})

	t.Run("account keys", func(t *testing.T) {
		acct := wd.key.AccountID
		var made []string
		for range 3 {
			made = append(made, wd.s.CreateKey(acct, "markets:read").KeyID)
		}
		wd.s.RevokeKey(made[1])
		all := []string{wd.key.KeyID}
		all = append(all, made...)
		slices.Sort(all)
		var got []string
		for k, err := range c.AccountKeys(ctx, client.AccountKeysFilter{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			if k.AccountID != acct || k.Last4 == "" {
				t.Fatalf("key record: got %+v", k)
			}
			if (k.KeyID == made[1]) != (k.Status == "revoked" && k.RevokedAt != nil) {
				t.Fatalf("key %s: got status %s revoked_at %v", k.KeyID, k.Status, k.RevokedAt)
			}
			got = append(got, k.KeyID)
		}
		if !slices.Equal(got, all) {
			t.Fatalf("account keys: got %v, want %v", got, all)
		}
		var revoked []string
		for k, err := range c.AccountKeys(ctx, client.AccountKeysFilter{Status: "revoked"}) {
			if err != nil {
				t.Fatal(err)
			}
			revoked = append(revoked, k.KeyID)
		}
		if !slices.Equal(revoked, made[1:2]) {
			t.Fatalf("revoked keys: got %v, want %v", revoked, made[1:2])
		}
	})

	t.Run("usage", func(t *testing.T) {
		today := time.Now().UTC()
		// Counts are visible within 5 s (contract §3).
		wd.s.Await("the key route's usage counted", func() (bool, string) {
			var rows []client.UsageRow
			for r, err := range c.Usage(ctx, client.UsageFilter{Route: "key", From: today.AddDate(0, 0, -1), To: today, Limit: 1}) {
				if err != nil {
					return false, err.Error()
				}
				rows = append(rows, r)
			}
			if len(rows) != 1 || rows[0].Route != "key" || rows[0].Count < 1 {
				return false, fmt.Sprintf("%+v", rows)
			}
			d, err := rows[0].DateTime()
			// Today, unless the test ran across midnight UTC.
			return err == nil && d.Format(time.DateOnly) == rows[0].Date && today.Sub(d) < 48*time.Hour, fmt.Sprintf("%+v", rows)
		})
		// A node flushes its counts every second or so, and the key route was
		// called before the others: its count can be visible a flush ahead of
		// theirs. Wait for every route this test used, walking pages of 3.
		wd.s.Await("the events and snapshot routes' usage counted", func() (bool, string) {
			var rows []client.UsageRow
			var routes []string
			for r, err := range c.Usage(ctx, client.UsageFilter{Limit: 3}) {
				if err != nil {
					return false, err.Error()
				}
				rows = append(rows, r)
				routes = append(routes, r.Route)
			}
			sorted := slices.IsSortedFunc(rows, func(a, b client.UsageRow) int {
				return cmp.Or(cmp.Compare(a.Date, b.Date), cmp.Compare(a.Route, b.Route))
			})
			if !sorted {
				t.Fatalf("usage: got %+v, want rows by date and route", rows)
			}
			return slices.Contains(routes, "events") && slices.Contains(routes, "snapshot"), fmt.Sprintf("%+v", rows)
		})
		_, err := func() (client.UsageRow, error) {
			for r, err := range c.Usage(ctx, client.UsageFilter{From: today, To: today.AddDate(0, 0, -2)}) {
				return r, err
			}
			return client.UsageRow{}, nil
		}()
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
			t.Fatalf("from after to: got %v, want 422", err)
		}
	})
}
