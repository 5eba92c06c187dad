package api

import (
	"testing"
	"time"

	"github.com/marketdata/marketdata/api/usage"
	"github.com/marketdata/marketdata/store"
)

// FuzzParseUsageQuery: any query of /account/usage is either refused with
// a 422 and a message, or gives a range from ≤ to of at most 366 days, a
// limit of 1 to 100 and a route of the contract's list (or none), with the
// dates as sent kept for the cursor binding. Never a panic.
func FuzzParseUsageQuery(f *testing.F) {
	for _, s := range [][5]string{
		{"", "", "", "", ""}, {"100", "snapshot", "2026-01-01", "2026-01-31", ""}, {"0", "", "", "", ""},
		{"", "stream", "2025-01-01", "2026-01-01", "abc"}, {"", "", "2026-13-01", "", ""}, {"", "", "2026-2-1", "", ""},
		{"", "", "", "2000-01-01", ""}, {"", "events ", "", "", ""}, {"-1", "", "", "", ""}, {"", "", "2026-01-01T00:00:00Z", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	today := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, limit, route, from, to, cursor string) {
		q, err := parseUsageQuery(limit, route, from, to, cursor, today)
		if err != nil {
			if err.Kind != KindInvalidRequest || err.Message == "" {
				t.Fatalf("refusal %+v: want 422 invalid_request with a message", err)
			}
			return
		}
		if q.from.After(q.to) || q.to.Sub(q.from) >= usageMaxDays*24*time.Hour {
			t.Fatalf("range %s..%s accepted", q.from, q.to)
		}
		if q.limit < 1 || q.limit > 100 {
			t.Fatalf("limit %d accepted", q.limit)
		}
		if _, known := usage.ParseRoute(q.route); q.route != "" && !known {
			t.Fatalf("route %q accepted", q.route)
		}
		if (from == "") != (q.rawFrom == "") || (to == "") != (q.rawTo == "") {
			t.Fatalf("dates as sent %q %q kept as %q %q", from, to, q.rawFrom, q.rawTo)
		}
		if q.rawFrom != "" && q.rawFrom != from {
			t.Fatalf("from %q kept as %q", from, q.rawFrom)
		}
	})
}

// FuzzUsagePosition: a cursor position reads back to the day and route it
// was made of, and anything else is refused, never a panic.
func FuzzUsagePosition(f *testing.F) {
	for _, s := range []string{"2026-01-01_key", "2026-01-01_", "2026-01-01key", "", "2026-01-01_account_usage", "x_key"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		day, route, ok := parseUsagePosition(p)
		if !ok {
			return
		}
		if got := usagePosition(store.UsageCount{Day: day, Route: route}); got != p {
			t.Fatalf("position %q reads back as %q", p, got)
		}
	})
}
