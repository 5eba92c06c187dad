package feed

import (
	"fmt"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// pacedClock is the clock of a feed paced at one message per step: the test
// moves it on before each Next, as Run's pacer would.
type pacedClock struct{ now time.Time }

func (c *pacedClock) Now() time.Time { return c.now }

// runPaced builds a generator on clock c and returns its Initial() and then
// n messages of Next(), one per step of c, decoded.
func runPaced(t *testing.T, events int, seed uint64, c *pacedClock, step time.Duration, n int) []decoded {
	t.Helper()
	g := NewGenerator(GenConfig{Events: events, Seed: seed, Now: c.Now})
	msgs := g.Initial()
	for range n {
		c.now = c.now.Add(step)
		msgs = append(msgs, g.Next())
	}
	return decodeAll(t, ingest.DefaultSubjectPrefix, msgs)
}

// TestRestartContinues runs the feed twice over the same world (same seed),
// the second run starting a second after the first ended, as `marketdata
// dev` restarted does, and checks that the second run continues the world
// rather than replaying the first: its versions are above the first run's
// for every entity, its trades are new (ids, and contents), and an id names
// the same event or market in both runs (the events a run adds are the
// seed's, whichever run adds them).
func TestRestartContinues(t *testing.T) {
	const (
		events = 200
		seed   = 1
		step   = 20 * time.Millisecond // dev's 50 messages a second
		n      = 6_000                 // two minutes each
	)
	c := &pacedClock{now: testEpoch}
	first := runPaced(t, events, seed, c, step, n)
	c.now = c.now.Add(time.Second)
	second := runPaced(t, events, seed, c, step, n)

	type tradeKey struct {
		market, side string
		price, size  float64
		ts           time.Time
	}
	highest := map[string]int64{} // kind/key → the first run's highest version
	trades := map[tradeKey]bool{}
	tradeIDs := map[string]bool{}
	titles := map[string]string{} // event or market id → its title in the first run
	var firstTrades []tradeKey
	for _, m := range first {
		switch m.Kind {
		case ingest.KindTrade:
			k := tradeKey{m.Trade.MarketID, m.Trade.Side, m.Trade.Price, m.Trade.Size, m.Trade.TS}
			trades[k] = true
			tradeIDs[m.Trade.TradeID] = true
			firstTrades = append(firstTrades, k)
			continue
		case ingest.KindEvent:
			titles[m.Event.ID] = m.Event.Title
		case ingest.KindMarket:
			titles[m.Market.ID] = m.Market.EventID + ": " + m.Market.Title
		}
		key := m.Kind + "/" + m.Key()
		highest[key] = max(highest[key], version(m.Update))
	}

	sameAtPosition, i, readded := 0, 0, map[string]bool{}
	for j, m := range second {
		switch m.Kind {
		case ingest.KindTrade:
			k := tradeKey{m.Trade.MarketID, m.Trade.Side, m.Trade.Price, m.Trade.Size, m.Trade.TS}
			if trades[k] {
				t.Errorf("message %d: trade %s repeats one of the first run's: %+v", j, m.Trade.TradeID, k)
			}
			if tradeIDs[m.Trade.TradeID] {
				t.Errorf("message %d: trade id %s was the first run's", j, m.Trade.TradeID)
			}
			// The old fault: the same trades in the same order, under new
			// ids and times.
			if i < len(firstTrades) {
				f := firstTrades[i]
				if f.market == k.market && f.side == k.side && f.price == k.price && f.size == k.size {
					sameAtPosition++
				}
			}
			i++
			continue
		case ingest.KindEvent:
			was, ok := titles[m.Event.ID]
			if ok && was != m.Event.Title {
				t.Errorf("message %d: event %s is %q, the first run's was %q", j, m.Event.ID, m.Event.Title, was)
			}
			if ok && m.Event.ID > fmt.Sprintf("ev_%06d", events) {
				readded[m.Event.ID] = true
			}
		case ingest.KindMarket:
			now := m.Market.EventID + ": " + m.Market.Title
			if was, ok := titles[m.Market.ID]; ok && was != now {
				t.Errorf("message %d: market %s is %q, the first run's was %q", j, m.Market.ID, now, was)
			}
		}
		key := m.Kind + "/" + m.Key()
		if v, top := version(m.Update), highest[key]; v <= top {
			t.Errorf("message %d: %s version %d is not above the first run's highest, %d", j, key, v, top)
		}
	}
	if i < 100 {
		t.Fatalf("the second run made %d trades, want 100 or more", i)
	}
	if len(readded) == 0 {
		t.Errorf("the second run added none of the events the first run added")
	}
	if sameAtPosition*20 > i {
		t.Errorf("%d of the second run's %d trades are the first run's, in the same order (market, side, price, size)", sameAtPosition, i)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d trades in the second run, %d equal to the first run's at the same position; %d added events the same in both runs",
		i, sameAtPosition, len(readded))
}
