package feed

import (
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// hourFigures is what one simulated hour of a feed did to the markets that
// were trading when it began.
type hourFigures struct {
	live, survived int // trading at the start; still trading at the end
	// trades, prices and distinct trade prices of each survivor.
	trades, prices, levels []int
	resolutions, newEvents int
}

// simulateHour runs a feed of events events at rate messages a second for
// one hour of its clock, as `marketdata dev` does (Run's pacer gives message
// n the time start + n/rate), and checks on the way that no market trades
// or gets a quote after its resolution (its settlement price, no bid or
// ask, is the one price that may follow).
func simulateHour(t *testing.T, events int, rate float64, life time.Duration) hourFigures {
	t.Helper()
	c := &pacedClock{now: testEpoch}
	g := NewGenerator(GenConfig{Events: events, Seed: 1, Now: c.Now, EventLife: life})
	g.Initial()
	var start []*market
	for _, m := range g.liveMarkets {
		if !m.hot {
			start = append(start, m)
		}
	}
	known := map[string]bool{}
	for _, e := range g.events {
		known[e.id] = true
	}
	trades, prices := map[string]int{}, map[string]int{}
	levels := map[string]map[float64]bool{}
	resolved := map[string]bool{}
	var f hourFigures
	step := time.Duration(float64(time.Second) / rate)
	for n := 0; n < int(rate*3600); n++ {
		c.now = c.now.Add(step)
		m := g.Next()
		u, err := ingest.Decode(ingest.DefaultSubjectPrefix, m.Subject, m.Data)
		if err != nil {
			t.Fatalf("message %d (%s) rejected: %v", n, m.Subject, err)
		}
		switch u.Kind {
		case ingest.KindEvent:
			if !known[u.Event.ID] {
				known[u.Event.ID] = true
				f.newEvents++
			}
		case ingest.KindMarket:
			if u.Market.Status == store.StatusResolved && !resolved[u.Market.ID] {
				resolved[u.Market.ID] = true
				f.resolutions++
			}
		case ingest.KindTrade:
			id := u.Trade.MarketID
			if resolved[id] {
				t.Fatalf("%s trades after its resolution: %s", id, m.Data)
			}
			trades[id]++
			if levels[id] == nil {
				levels[id] = map[float64]bool{}
			}
			levels[id][u.Trade.Price] = true
		case ingest.KindPrice:
			id := u.Price.MarketID
			for v, q := range u.Price.Quotes {
				if resolved[id] && (q.Bid != nil || q.Ask != nil) {
					t.Fatalf("%s is quoted on %s after its resolution: %s", id, v, m.Data)
				}
			}
			prices[id]++
		}
	}
	f.live = len(start)
	for _, m := range start {
		if m.slot < 0 { // resolved, or its event merged: it trades no more
			continue
		}
		f.survived++
		f.trades = append(f.trades, trades[m.id])
		f.prices = append(f.prices, prices[m.id])
		f.levels = append(f.levels, len(levels[m.id]))
	}
	return f
}

func mean(xs []int) float64 {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(max(1, len(xs)))
}

// TestMarketsTradeEveryHour: the feed as `marketdata dev` and `marketdata
// feed` run it by default (EventLife 12 h) keeps most markets trading
// through an hour, so their candles over the last hours are not those of
// markets minutes old, and gives those markets trades enough for their 1h
// candles to look real: on average at least minMeanTrades an hour, every
// one at least one trade, and all but 1% at least minTrades, at several
// prices, with price updates besides. (Trades pick their market at random,
// so a market's count in an hour is Poisson: a floor on every market would
// hold the mean far above it.) The lifecycle still goes on: markets
// resolve and new events appear within the hour.
func TestMarketsTradeEveryHour(t *testing.T) {
	const (
		minMeanTrades = 10
		minTrades     = 4
		minLevels     = 3 // distinct trade prices
		minPrices     = 20
		minSurvivors  = 0.90 // of the markets trading at the start
	)
	tests := []struct {
		name   string
		events int
		rate   float64
	}{
		{"dev: 200 events at 50/s", 200, 50},
		{"feed: 1000 events at 100/s", 1000, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := simulateHour(t, tt.events, tt.rate, 12*time.Hour)
			t.Logf("%d of %d markets trading through the hour; trades an hour: mean %.1f, 1st percentile %d, min %d; prices an hour: mean %.1f, min %d; %d resolutions, %d new events",
				f.survived, f.live, mean(f.trades), percentile1(f.trades), slices.Min(f.trades), mean(f.prices), slices.Min(f.prices), f.resolutions, f.newEvents)
			if got := float64(f.survived) / float64(f.live); got < minSurvivors {
				t.Errorf("%d of %d markets trading at the start still trade an hour later (%.2f), want at least %.2f",
					f.survived, f.live, got, minSurvivors)
			}
			if got := mean(f.trades); got < minMeanTrades {
				t.Errorf("%.1f trades an hour on a market trading through the hour, want at least %d", got, minMeanTrades)
			}
			if got := slices.Min(f.trades); got < 1 {
				t.Errorf("a market trading through the hour got %d trades in it, want at least one", got)
			}
			for _, check := range []struct {
				what string
				xs   []int
				min  int
			}{{"trades", f.trades, minTrades}, {"trade prices", f.levels, minLevels}, {"price updates", f.prices, minPrices}} {
				if got := percentile1(check.xs); got < check.min {
					t.Errorf("1%% of the markets trading through the hour got %d %s or fewer in it, want at least %d", got, check.what, check.min)
				}
			}
			if f.resolutions == 0 || f.newEvents == 0 {
				t.Errorf("%d resolutions and %d new events in the hour, want some of each", f.resolutions, f.newEvents)
			}
		})
	}
}

// percentile1 is the value 1% of xs are at or below.
func percentile1(xs []int) int {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/100]
}

// TestLifecycleByMessages: with no EventLife the lifecycle follows the
// messages, as the tests that want every kind of change within seconds
// use it: at dev's rate few markets trade through an hour.
func TestLifecycleByMessages(t *testing.T) {
	f := simulateHour(t, 200, 50, 0)
	t.Logf("%d of %d markets trading through the hour; %d resolutions, %d new events", f.survived, f.live, f.resolutions, f.newEvents)
	if f.survived*4 > f.live {
		t.Errorf("%d of %d markets trading at the start still trade an hour later, want under a quarter", f.survived, f.live)
	}
	if f.resolutions < 1000 {
		t.Errorf("%d resolutions in the hour, want the message stream's thousands", f.resolutions)
	}
}
