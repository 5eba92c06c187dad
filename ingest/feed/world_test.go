package feed

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

func TestWorldHasItsRareCases(t *testing.T) {
	g := newTestGenerator(t, 200, 42)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 20_000))

	oneVenue := 0
	for _, m := range msgs[:200] {
		if m.Event.VenueCount() == 1 {
			oneVenue++
		}
	}
	if oneVenue < 6 || oneVenue > 40 {
		t.Errorf("%d of 200 initial events have one venue, want about 10%%", oneVenue)
	}

	counts := map[string]int{}
	for _, m := range msgs[len(g.Initial()):] {
		switch {
		case m.Kind == ingest.KindMarket && m.Market.Status == store.StatusResolved:
			counts["market resolved"]++
		case m.Kind == ingest.KindEvent && m.Event.Status == store.StatusResolved:
			counts["event resolved"]++
		case m.Kind == ingest.KindEvent && m.Event.Status == store.StatusMerged:
			counts["event merged"]++
		case m.Kind == ingest.KindEvent && m.Event.Version == g.base+1:
			counts["event created"]++
		}
	}
	for _, what := range []string{"market resolved", "event resolved", "event merged", "event created"} {
		if counts[what] == 0 {
			t.Errorf("no %s among 20,000 changes", what)
		}
	}
	if live := len(g.liveEvents); live < 150 || live > 250 {
		t.Errorf("%d live events after 20,000 changes, want about 200", live)
	}
}

// TestWorldIsConsistent replays the messages the way a store would and
// checks what the contract's readers rely on.
func TestWorldIsConsistent(t *testing.T) {
	g := newTestGenerator(t, 200, 5)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 20_000))
	events := map[string]*store.Event{}
	markets := map[string]*store.Market{}
	for i, m := range msgs {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("message %d (%s): "+format, append([]any{i, m.Subject}, args...)...)
		}
		switch m.Kind {
		case ingest.KindEvent:
			e := m.Event
			if e.Status == store.StatusMerged && (events[*e.MergedInto] == nil || *e.MergedInto == e.ID) {
				fail("merged into %q, which is not another known event", *e.MergedInto)
			}
			events[e.ID] = e
		case ingest.KindMarket:
			mk := m.Market
			e := events[mk.EventID]
			if e == nil {
				fail("market of unknown event %s", mk.EventID)
			}
			for venue := range mk.Venues {
				if e.VenueIDs[store.VenueIndex(venue)] == nil {
					fail("market listed on %s, its event is not", venue)
				}
			}
			if mk.Status == store.StatusResolved && *mk.Result != "yes" && *mk.Result != "no" {
				fail("result %q", *mk.Result)
			}
			markets[mk.ID] = mk
		case ingest.KindPrice:
			mk := markets[m.Price.MarketID]
			if mk == nil {
				fail("price of unknown market")
			}
			if len(m.Price.Quotes) != len(mk.Venues) {
				fail("quotes on %d venues, market listed on %d", len(m.Price.Quotes), len(mk.Venues))
			}
			for venue, q := range m.Price.Quotes {
				if _, ok := mk.Venues[venue]; !ok {
					fail("quote on %s, where the market is not listed", venue)
				}
				if mk.Status == store.StatusResolved { // the settlement: book closed, last 0 or 1
					want := 0.0
					if *mk.Result == "yes" {
						want = 1
					}
					if mk.Matches.Inverted(store.VenueIndex(venue)) { // a complement venue settles in its own terms
						want = 1 - want
					}
					if q.Bid != nil || q.Ask != nil || q.Last == nil || *q.Last != want {
						fail("%s settlement quote %s, want no bid, no ask, last %v", venue, fmtQuote(q), want)
					}
					continue
				}
				if q.Bid == nil || q.Ask == nil || q.Last == nil || !(0 < *q.Bid && *q.Bid < *q.Ask && *q.Ask < 1 && *q.Bid <= *q.Last && *q.Last <= *q.Ask) {
					fail("%s quote %s, want 0 < bid < ask < 1 and bid ≤ last ≤ ask", venue, fmtQuote(q))
				}
			}
		case ingest.KindTrade:
			mk := markets[m.Trade.MarketID]
			if mk == nil || mk.Status != store.StatusActive || events[mk.EventID].Status != store.StatusActive {
				fail("trade on a market that is not trading")
			}
			if _, ok := mk.Venues[m.Trade.Venue]; !ok {
				fail("trade on %s, where the market is not listed", m.Trade.Venue)
			}
		}
	}
}

func TestTimesHaveFractionalSeconds(t *testing.T) {
	// A clock on whole seconds: time.RFC3339Nano would drop the fraction.
	g := NewGenerator(GenConfig{Events: 20, Seed: 3, Now: stepClock(t, testEpoch, time.Second)})
	timeField := regexp.MustCompile(`"(updated_at|resolved_at|ts)":"([^"]*)"`)
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	for _, m := range generate(t, g, 2_000) {
		for _, f := range timeField.FindAllSubmatch(m.Data, -1) {
			if !want.Match(f[2]) {
				t.Fatalf("%s: %s = %q, want RFC 3339 UTC with microseconds", m.Subject, f[1], f[2])
			}
		}
	}
}

func TestVenueIDShapes(t *testing.T) {
	g := newTestGenerator(t, 300, 11)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 5_000))
	tests := []struct {
		venue       string
		event, mark *regexp.Regexp
	}{
		{"venue_a", regexp.MustCompile(`^KX[A-Z0-9]+-[A-Z0-9]+(-\d+)?$`), regexp.MustCompile(`^KX[A-Z0-9]+-[A-Z0-9]+(-\d+)?-[A-Z0-9]{1,12}(-\d+)?$`)},
		{"venue_b", regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`), regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)},
		{"venue_c", regexp.MustCompile(`^\d{7}$`), regexp.MustCompile(`^\d{6}$`)},
		{"venue_d", regexp.MustCompile(`^0x[0-9a-f]{24}$`), regexp.MustCompile(`^0x[0-9a-f]{32}$`)},
	}
	for _, tt := range tests {
		t.Run(tt.venue, func(t *testing.T) {
			vi := store.VenueIndex(tt.venue)
			nEvents, nMarkets := 0, 0
			for _, m := range msgs {
				switch m.Kind {
				case ingest.KindEvent:
					if id := m.Event.VenueIDs[vi]; id != nil {
						nEvents++
						if !tt.event.MatchString(*id) {
							t.Errorf("event id %q on %s has the wrong shape", *id, tt.venue)
						}
					}
				case ingest.KindMarket:
					if id, ok := m.Market.Venues[tt.venue]; ok {
						nMarkets++
						if !tt.mark.MatchString(id) {
							t.Errorf("market id %q on %s has the wrong shape", id, tt.venue)
						}
					}
				}
			}
			if nEvents == 0 || nMarkets == 0 {
				t.Errorf("%d event ids and %d market ids on %s, want some of each", nEvents, nMarkets, tt.venue)
			}
		})
	}
}

func TestConfigDefaultsAndRanges(t *testing.T) {
	tests := []struct {
		name        string
		cfg         GenConfig
		wantEvents  int
		wantMarkets [2]int
		wantPrefix  string
	}{
		{"zero config", GenConfig{}, DefaultEvents, [2]int{2, 6}, ingest.DefaultSubjectPrefix},
		{"explicit", GenConfig{Events: 7, MarketsPerEvent: [2]int{3, 4}, SubjectPrefix: "x." + ingest.DefaultSubjectPrefix}, 7, [2]int{3, 4}, "x." + ingest.DefaultSubjectPrefix},
		{"max below min", GenConfig{Events: 5, MarketsPerEvent: [2]int{5, 3}}, 5, [2]int{5, 5}, ingest.DefaultSubjectPrefix},
		{"out of range", GenConfig{Events: -3, MarketsPerEvent: [2]int{-1, 500}}, DefaultEvents, [2]int{1, 50}, ingest.DefaultSubjectPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Now = stepClock(t, testEpoch, time.Millisecond)
			g := NewGenerator(tt.cfg)
			if got := len(g.events); got != tt.wantEvents {
				t.Errorf("events = %d, want %d", got, tt.wantEvents)
			}
			if got := g.cfg.MarketsPerEvent; got != tt.wantMarkets {
				t.Errorf("MarketsPerEvent = %v, want %v", got, tt.wantMarkets)
			}
			for _, e := range g.events {
				if n := len(e.markets); n < tt.wantMarkets[0] || n > tt.wantMarkets[1] {
					t.Errorf("event %s has %d markets, want %d..%d", e.id, n, tt.wantMarkets[0], tt.wantMarkets[1])
				}
			}
			decodeAll(t, tt.wantPrefix, generate(t, g, 500))
		})
	}
}

func fmtQuote(q store.Quote) string {
	f := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	return "bid " + f(q.Bid) + " ask " + f(q.Ask) + " last " + f(q.Last)
}
