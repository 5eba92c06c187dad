package api

import (
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// candlesFuzzNow is the default to of FuzzParseCandleQuery.
var candlesFuzzNow = time.Date(2024, 5, 10, 12, 34, 56, 789, time.UTC)

// FuzzParseCandleQuery: parsing never panics and refuses only with
// KindInvalidRequest; what it accepts is a known interval and venue, an
// aligned start, and 1 to MaxCandles buckets that hold the requested range.
func FuzzParseCandleQuery(f *testing.F) {
	f.Add("1h", "2024-05-10T11:00:00Z", "2024-05-10T15:00:00Z", "all")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, interval, from, to, venue string) {
		q, err := parseCandleQuery(interval, from, to, venue, candlesFuzzNow)
		if err != nil {
			if err.Kind != KindInvalidRequest || err.Message == "" {
				t.Fatalf("refused with kind %v, message %q; want KindInvalidRequest and a message", err.Kind, err.Message)
			}
			return
		}
		step, ok := store.CandleStep(q.interval)
		if !ok || (interval != "" && q.interval != interval) {
			t.Fatalf("interval %q accepted as %q", interval, q.interval)
		}
		if !slices.Contains(store.CandleSeries[:], q.venue) || (venue != "" && q.venue != venue) {
			t.Fatalf("venue %q accepted as %q", venue, q.venue)
		}
		if q.n < 1 || q.n > store.MaxCandles {
			t.Fatalf("%d buckets accepted", q.n)
		}
		if q.start.Location() != time.UTC || !q.start.Equal(q.start.Truncate(step)) {
			t.Fatalf("start %s is not aligned on %s", q.start, step)
		}
		end := candlesFuzzNow
		if to != "" {
			end, _ = time.Parse(time.RFC3339, to)
		}
		// The buckets hold to, and no bucket more than it needs.
		last := q.start.Add(time.Duration(q.n) * step)
		if last.Before(end) || !last.Add(-step).Before(end) {
			t.Fatalf("%d buckets of %s from %s do not end at the bucket of %s", q.n, step, q.start, end)
		}
		if from == "" && q.n != defaultCandles && q.n != defaultCandles+1 {
			t.Fatalf("default range holds %d candles", q.n)
		}
	})
}
