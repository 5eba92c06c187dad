package feed

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// readmePick is the market ids the README's examples use: the first two
// markets of the first active event (by id) on three venues or more
// (`events?limit=1&min_venues=3`).
func readmePick(t *testing.T, msgs []decoded) []string {
	t.Helper()
	var first string
	for _, m := range msgs {
		if m.Kind == ingest.KindEvent && m.Event.VenueCount() >= 3 && (first == "" || m.Event.ID < first) {
			first = m.Event.ID
		}
	}
	var ids []string
	for _, m := range msgs {
		if m.Kind == ingest.KindMarket && m.Market.EventID == first && !slices.Contains(ids, m.Market.ID) {
			ids = append(ids, m.Market.ID)
		}
	}
	slices.Sort(ids)
	if len(ids) < 2 {
		t.Fatalf("the README's event %q has markets %v, want two or more", first, ids)
	}
	return ids[:2]
}

func TestHotMarketsStayLive(t *testing.T) {
	tests := []struct {
		name   string
		events int
		seed   uint64
		step   time.Duration // one message per step
	}{
		{"dev: 200 events at 50/s", 200, 1, 20 * time.Millisecond},
		{"feed: 1,000 events at 100/s", 1000, 1, 10 * time.Millisecond},
		{"other seed at 50/s", 200, 77, 20 * time.Millisecond},
		{"small world at 50/s", 12, 7, 20 * time.Millisecond},
	}
	const window = 90 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := testEpoch
			c := &pacedClock{now: start}
			g := NewGenerator(GenConfig{Events: tt.events, Seed: tt.seed, Now: c.Now})
			initial := decodeAll(t, ingest.DefaultSubjectPrefix, g.Initial())

			// Every market gets a price at least every 2 s while it is hot,
			// from the start of the changes (or from when it became hot) to
			// the end of the window. The set may change: an earlier event
			// listed on a third venue is the README's pick from then on.
			last := map[string]time.Time{} // hot market → its last price (or when it became hot)
			hotTrades, hotMsgs, early := 0, 0, 0
			for i := range int(window / tt.step) {
				c.now = c.now.Add(tt.step)
				m := decodeAll(t, ingest.DefaultSubjectPrefix, []Msg{g.Next()})[0]
				at := c.now
				for id := range last {
					if !slices.ContainsFunc(g.hot, func(h *market) bool { return h.id == id }) {
						delete(last, id)
					}
				}
				for _, h := range g.hot {
					if _, ok := last[h.id]; !ok {
						last[h.id] = at.Add(-tt.step)
					}
				}
				if i == 0 && tt.events >= 200 {
					for _, id := range readmePick(t, initial) {
						if _, ok := last[id]; !ok {
							t.Errorf("the README's market %s is not hot (hot: %v)", id, keys(last))
						}
					}
				}
				var id string
				switch m.Kind {
				case ingest.KindPrice:
					id = m.Price.MarketID
				case ingest.KindTrade:
					id = m.Trade.MarketID
				default:
					continue
				}
				if _, ok := last[id]; !ok {
					continue
				}
				hotMsgs++
				if m.Kind == ingest.KindTrade {
					hotTrades++
					if at.Sub(start) <= 5*time.Second {
						early++
					}
					continue
				}
				if gap := at.Sub(last[id]); gap > 2*time.Second {
					t.Errorf("hot market %s: no price for %v before +%v", id, gap, at.Sub(start))
				}
				last[id] = at
			}
			if n := len(last); n < 2 || n > hotMaxMarkets {
				t.Fatalf("%d hot markets, want 2..%d", n, hotMaxMarkets)
			}
			end := start.Add(window)
			for id, at := range last {
				if gap := end.Sub(at); gap > 2*time.Second {
					t.Errorf("hot market %s: no price in the last %v of the window", id, gap)
				}
			}
			if early < 3 {
				t.Errorf("%d trades on hot markets in the first 5 s, want 3 or more", early)
			}
			// A few messages a second, not a flood (in a world of hundreds of
			// markets, where the other changes seldom fall on a hot one).
			if rate := float64(hotMsgs) / window.Seconds(); tt.events >= 200 && rate > 10 {
				t.Errorf("the hot markets take %.1f messages a second, want a few (≤ 10)", rate)
			}
			t.Logf("hot at the end: %v; %.1f messages/s on hot markets, %d trades (%d in the first 5 s)",
				keys(last), float64(hotMsgs)/window.Seconds(), hotTrades, early)
		})
	}
}

// TestHotMarketsTradeWhenRun runs the feed as dev does (real clock, 50
// messages a second) and waits until the hot markets have each had a price
// and three trades among them: it must happen in the first seconds.
func TestHotMarketsTradeWhenRun(t *testing.T) {
	g := NewGenerator(GenConfig{Events: 200, Seed: 1})
	hot := map[string]bool{}
	g.pickHot(time.Now())
	for _, m := range g.hot {
		hot["."+m.id] = true
	}
	initial := len(g.Initial())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := &fakeJS{}
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		_, err := run(ctx, js, g, RunOptions{Rate: 50, Duration: 10 * time.Second})
		done <- err
	}()

	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var priced map[string]bool
	trades := 0
	for {
		priced, trades = map[string]bool{}, 0
		msgs := js.messages()
		for _, m := range msgs[min(initial, len(msgs)):] {
			i := strings.LastIndexByte(m.Subject, '.')
			if !hot[m.Subject[i:]] {
				continue
			}
			switch {
			case strings.Contains(m.Subject, ".price."):
				priced[m.Subject[i:]] = true
			case strings.Contains(m.Subject, ".trade."):
				trades++
			}
		}
		if len(priced) == len(hot) && trades >= 3 {
			break
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case err := <-done:
			t.Fatalf("run ended early: %v", err)
		}
		break
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(priced) < len(hot) || trades < 3 {
		t.Fatalf("after %v: %d of %d hot markets priced and %d trades on them, want all and 3",
			time.Since(began).Round(time.Millisecond), len(priced), len(hot), trades)
	}
	t.Logf("all %d hot markets priced and %d trades on them after %v", len(hot), trades, time.Since(began).Round(time.Millisecond))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
