package feed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// The coherence checks of issue 12: fair values consistent within an event,
// venue quotes around them, settlement at 0/1 and silence afterwards, titles
// that make sense. Each runs over a few seeds, on the initial world and after
// many changes.

var coherenceSeeds = []uint64{1, 2, 3, 42}

// checkpoints are the numbers of changes after which the world is checked.
var checkpoints = []int{0, 5_000, 30_000}

// view is the world as a consumer of the messages sees it: the latest
// market and price message of every market, a complement venue's quotes in
// the market's terms (inverted), as the service shows them.
type view struct {
	markets map[string]*store.Market
	prices  map[string]*store.Price
}

func newView() *view {
	return &view{markets: map[string]*store.Market{}, prices: map[string]*store.Price{}}
}

func (v *view) apply(t *testing.T, m Msg) *ingest.Update {
	t.Helper()
	u, err := ingest.Decode(ingest.DefaultSubjectPrefix, m.Subject, m.Data)
	if err != nil {
		t.Fatalf("%s rejected: %v\n%s", m.Subject, err, m.Data)
	}
	switch u.Kind {
	case ingest.KindMarket:
		v.markets[u.Market.ID] = u.Market
	case ingest.KindPrice:
		if mk := v.markets[u.Price.MarketID]; mk != nil {
			for venue, q := range u.Price.Quotes {
				if i := store.VenueIndex(venue); i >= 0 && mk.Matches.Inverted(i) {
					u.Price.Quotes[venue] = q.Invert()
				}
			}
		}
		v.prices[u.Price.MarketID] = u.Price
	}
	return u
}

// mid is the average of the venues' mid-quotes of m's latest price.
func (v *view) mid(t *testing.T, m *market) float64 {
	t.Helper()
	p := v.prices[m.id]
	if p == nil || len(p.Quotes) == 0 {
		t.Fatalf("market %s has no quotes", m.id)
	}
	sum := 0.0
	for venue, q := range p.Quotes {
		if q.Bid == nil || q.Ask == nil {
			t.Fatalf("active market %s has no bid or ask on %s", m.id, venue)
		}
		sum += (*q.Bid + *q.Ask) / 2
	}
	return sum / float64(len(p.Quotes))
}

// TestCoherence builds the world of every seed and runs the checks at every
// checkpoint, each as a subtest named after the check, seed and checkpoint.
func TestCoherence(t *testing.T) {
	var seen coherenceSeen
	checks := []struct {
		name  string
		check func(t *testing.T, g *Generator, v *view, seen *coherenceSeen)
	}{
		{"ExclusiveOutcomesSumToOne", checkExclusiveSums},
		{"LaddersAreMonotone", checkLadders},
		{"VenueQuotesAroundFairValue", checkQuotes},
	}
	eachCheckpoint(t, func(t *testing.T, g *Generator, v *view, at string) {
		for _, c := range checks {
			t.Run(c.name+"/"+at, func(t *testing.T) { c.check(t, g, v, &seen) })
		}
	})
	if seen.exclusive == 0 || seen.ladders == 0 {
		t.Fatalf("checked %d exclusive events and %d ladders, want some of each", seen.exclusive, seen.ladders)
	}
}

// coherenceSeen counts what the checks looked at, so that a world without
// any exclusive event or ladder cannot pass them vacuously.
type coherenceSeen struct{ exclusive, ladders int }

// eachCheckpoint runs check on the world of every seed at every checkpoint.
func eachCheckpoint(t *testing.T, check func(t *testing.T, g *Generator, v *view, at string)) {
	t.Helper()
	for _, seed := range coherenceSeeds {
		g := newTestGenerator(t, 200, seed)
		v := newView()
		for _, m := range g.Initial() {
			v.apply(t, m)
		}
		done := 0
		for _, n := range checkpoints {
			for ; done < n; done++ {
				v.apply(t, g.Next())
			}
			for len(g.pending) > 0 { // finish a change that spans several messages
				v.apply(t, g.Next())
			}
			check(t, g, v, fmt.Sprintf("seed%d/after%d", seed, n))
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}

func activeMarkets(e *event) []*market {
	var out []*market
	for _, m := range e.markets {
		if m.status == store.StatusActive {
			out = append(out, m)
		}
	}
	return out
}

// liveOf are the active events of kind k.
func liveOf(g *Generator, k kind) []*event {
	var out []*event
	for _, e := range g.events {
		if e.status == store.StatusActive && e.kind == k {
			out = append(out, e)
		}
	}
	return out
}

// checkExclusiveSums checks an exclusive event's prices against what the
// model guarantees (prices.go):
//   - the fair values of its active outcomes sum to 1 (a softmax);
//   - each outcome was last quoted at a fair value at most staleLimit from
//     its current one: a step of one outcome requotes the siblings it moved
//     further than that (Generator.priceChange);
//   - each venue's mid-quote is where that quoted fair value lands on the
//     venue's grid, up to the venue's bias and jitter and half a tick;
//   - so the outcomes' mid-quotes, averaged over venues, sum to the fair
//     values on the grids (1, unless a book is pinned at an edge) within
//     staleLimit per outcome plus a little for the venues' errors, which
//     average out across venues and outcomes.
//
// Disabling the siblings' requote in priceChange fails the staleness check
// (outcomes then lag their fair values by up to 0.07) and, on its own, the
// sum check (a three-outcome event's mid-quotes then sum to 0.93, against
// 1 ± 0.065); tripling the venues' bias fails the venue check.
func checkExclusiveSums(t *testing.T, g *Generator, v *view, seen *coherenceSeen) {
	// venueErr bounds one venue's |bias + jitter|: five standard deviations.
	venueErr := 5 * math.Hypot(venueBias, quoteNoise)
	// sumErr bounds the venues' errors summed over an event's outcomes (the
	// standard deviation of that sum is under 0.012 for six outcomes quoted
	// on one venue each, and smaller on more venues).
	const sumErr = 0.02
	var devSum float64
	var n int
	for _, e := range liveOf(g, exclusive) {
		ms := activeMarkets(e)
		if len(ms) < 2 {
			t.Errorf("exclusive event %s has %d active outcomes, want at least 2", e.id, len(ms))
			continue
		}
		seen.exclusive++
		fair, mids, want := 0.0, 0.0, 0.0
		for _, m := range ms {
			fair += m.p
			if lag := math.Abs(m.p - m.quotedP); lag > staleLimit+1e-12 {
				t.Errorf("exclusive event %s %q: outcome %q quoted at %.4f, its fair value is %.4f: %.4f stale, want at most %v",
					e.id, e.title, m.title, m.quotedP, m.p, lag, staleLimit)
			}
			p := v.prices[m.id]
			if p == nil || len(p.Quotes) == 0 {
				t.Fatalf("market %s has no quotes", m.id)
			}
			mid, onGrid := 0.0, 0.0
			for venue, q := range p.Quotes {
				if q.Bid == nil || q.Ask == nil {
					t.Fatalf("active market %s has no bid or ask on %s", m.id, venue)
				}
				vi := slices.Index(store.Venues[:], venue)
				if vi < 0 {
					t.Fatalf("market %s quoted on an unknown venue %q", m.id, venue)
				}
				unit := float64(venueTicks[vi])
				vmid := (*q.Bid + *q.Ask) / 2
				// The book keeps edge ticks from 0 and 1 (requote), so its mid
				// stays at least edge plus half the spread from them.
				inset := float64(max(1, venueTicks[vi]/200))/unit + (*q.Ask-*q.Bid)/2
				grid := func(p float64) float64 { return clamp(p, inset, 1-inset) }
				if d := math.Abs(vmid - grid(m.quotedP)); d > venueErr+0.5/unit+1e-9 {
					t.Errorf("exclusive event %s %q: outcome %q on %s: mid %.4f for a quoted fair value of %.4f, want within %.4f",
						e.id, e.title, m.title, venue, vmid, m.quotedP, venueErr+0.5/unit)
				}
				mid += vmid
				onGrid += grid(m.p)
			}
			mid /= float64(len(p.Quotes))
			mids += mid
			want += onGrid / float64(len(p.Quotes))
			devSum += math.Abs(mid - m.p)
			n++
		}
		if math.Abs(fair-1) > 1e-9 {
			t.Errorf("exclusive event %s %q: fair values sum to %.12f, want 1", e.id, e.title, fair)
		}
		if bound := sumErr + staleLimit*float64(len(ms)); math.Abs(mids-want) > bound {
			t.Errorf("exclusive event %s %q: %d mid-quotes sum to %.4f, want %.4f ± %.3f", e.id, e.title, len(ms), mids, want, bound)
		}
	}
	if n > 0 && devSum/float64(n) > 0.02 {
		t.Errorf("exclusive outcomes' mid-quotes are %.3f from their fair values on average, want at most 0.02", devSum/float64(n))
	}
}

// checkLadders: a ladder's fair values are monotone along its thresholds
// ("above" falls, "by" rises), and its mid-quotes within two cents of that.
func checkLadders(t *testing.T, g *Generator, v *view, seen *coherenceSeen) {
	for _, e := range liveOf(g, ladder) {
		ms := activeMarkets(e)
		if len(ms) != len(e.markets) {
			t.Errorf("ladder %s has %d of %d markets active: a ladder settles whole", e.id, len(ms), len(e.markets))
		}
		seen.ladders++
		for i := 1; i < len(ms); i++ {
			lo, hi := ms[i-1], ms[i]
			if !(lo.threshold < hi.threshold) {
				t.Fatalf("ladder %s: thresholds %v then %v are not ascending", e.id, lo.threshold, hi.threshold)
			}
			// Along ascending thresholds, "above" falls and "by" rises.
			fairUp, midUp := hi.p-lo.p, v.mid(t, hi)-v.mid(t, lo)
			if !e.upward {
				fairUp, midUp = -fairUp, -midUp
			}
			if fairUp < 0 {
				t.Errorf("ladder %s %q: fair %q %.4f, %q %.4f: not monotone", e.id, e.title, lo.title, lo.p, hi.title, hi.p)
			}
			if midUp < -0.02 {
				t.Errorf("ladder %s %q: mid %q %.3f, %q %.3f: inverted", e.id, e.title, lo.title, v.mid(t, lo), hi.title, v.mid(t, hi))
			}
		}
	}
}

// checkQuotes checks every active market's quotes: sound books with one to
// four and a half cents of spread, mids close to the fair value, and across
// venues a best bid above the best ask rarely (under 5% of the markets on
// two venues or more), and then by little.
func checkQuotes(t *testing.T, g *Generator, v *view, _ *coherenceSeen) {
	multi, crossed := 0, 0
	var dev float64
	var n int
	for _, m := range g.liveMarkets {
		p := v.prices[m.id]
		bestBid, bestAsk := 0.0, 1.0
		for venue, q := range p.Quotes {
			if q.Bid == nil || q.Ask == nil || q.Last == nil {
				t.Fatalf("active market %s: %s quote %s lacks a price", m.id, venue, fmtQuote(q))
			}
			bid, ask, last := *q.Bid, *q.Ask, *q.Last
			if !(0 < bid && bid < ask && ask < 1 && bid <= last && last <= ask) {
				t.Errorf("market %s: %s quote %s, want 0 < bid ≤ last ≤ ask < 1, bid < ask", m.id, venue, fmtQuote(q))
			}
			if s := ask - bid; s < 0.0099 || s > 0.0451 {
				t.Errorf("market %s: %s spread %.3f, want 0.01..0.045", m.id, venue, s)
			}
			bestBid, bestAsk = max(bestBid, bid), min(bestAsk, ask)
			dev += math.Abs((bid+ask)/2 - m.p)
			n++
		}
		if len(p.Quotes) < 2 {
			continue
		}
		multi++
		if bestBid > bestAsk {
			crossed++
			if bestBid-bestAsk > 0.02 {
				t.Errorf("market %s crossed by %.3f across venues, want a small gap", m.id, bestBid-bestAsk)
			}
		}
	}
	if multi < 100 {
		t.Fatalf("only %d active markets on two venues or more", multi)
	}
	if share := float64(crossed) / float64(multi); share >= 0.05 {
		t.Errorf("%d of %d markets (%.1f%%) crossed across venues, want under 5%%", crossed, multi, 100*share)
	}
	if avg := dev / float64(n); avg > 0.02 {
		t.Errorf("venue mids are %.3f from the fair value on average, want at most 0.02", avg)
	}
}

// TestResolution replays a long run: a market's resolution is followed by
// exactly one price, its settlement (no bid, no ask, last 1 for "yes" and 0
// for "no"), and then by no price or trade; exclusive events end with
// exactly one "yes", ladders with results monotone along their thresholds.
func TestResolution(t *testing.T) {
	for _, seed := range coherenceSeeds[:3] {
		g := newTestGenerator(t, 100, seed)
		v := newView()
		for _, m := range g.Initial() {
			v.apply(t, m)
		}
		// settled: market id → whether its settlement price was seen.
		settled := map[string]bool{}
		for i := range 25_000 {
			m := g.Next()
			u := v.apply(t, m)
			switch u.Kind {
			case ingest.KindMarket:
				if u.Market.Status == store.StatusResolved {
					if _, again := settled[u.Market.ID]; again {
						t.Fatalf("seed %d message %d: market %s resolved twice", seed, i, u.Market.ID)
					}
					settled[u.Market.ID] = false
				}
			case ingest.KindPrice:
				id := u.Price.MarketID
				done, ok := settled[id]
				if !ok {
					continue
				}
				if done {
					t.Fatalf("seed %d message %d: a price for market %s after its settlement", seed, i, id)
				}
				settled[id] = true
				want := 0.0
				if *v.markets[id].Result == "yes" {
					want = 1
				}
				for venue, q := range u.Price.Quotes {
					if q.Bid != nil || q.Ask != nil || q.Last == nil || *q.Last != want {
						t.Fatalf("seed %d message %d: settlement of %s (%s) on %s is %s, want no bid, no ask, last %v",
							seed, i, id, *v.markets[id].Result, venue, fmtQuote(q), want)
					}
				}
			case ingest.KindTrade:
				if _, ok := settled[u.Trade.MarketID]; ok {
					t.Fatalf("seed %d message %d: a trade on market %s after its resolution", seed, i, u.Trade.MarketID)
				}
			}
		}
		for id, done := range settled {
			if !done && !slices.ContainsFunc(g.pending, func(m Msg) bool { return strings.HasSuffix(m.Subject, ".price."+id) }) {
				t.Fatalf("seed %d: market %s resolved without a settlement price", seed, id)
			}
		}

		counts := map[kind]int{}
		for _, e := range g.events {
			var results []string
			for _, m := range e.markets {
				results = append(results, m.result)
			}
			yes := strings.Count(strings.Join(results, ","), "yes")
			switch {
			case e.kind == exclusive && e.status == store.StatusResolved:
				counts[exclusive]++
				if yes != 1 || slices.Contains(results, "") {
					t.Errorf("seed %d: resolved exclusive event %s %q has results %v, want exactly one yes", seed, e.id, e.title, results)
				}
			case e.kind == exclusive:
				if yes != 0 {
					t.Errorf("seed %d: %s exclusive event %s has results %v: a yes ends the event", seed, e.status, e.id, results)
				}
			case e.kind == ladder && e.status == store.StatusResolved:
				counts[ladder]++
				// "above" ladders: yes then no along the thresholds; "by": no then yes.
				flips := 0
				for i := 1; i < len(results); i++ {
					if results[i] != results[i-1] {
						flips++
						if (results[i] == "yes") != e.upward {
							flips = 99
						}
					}
				}
				if flips > 1 || slices.Contains(results, "") {
					t.Errorf("seed %d: ladder %s %q (upward %v) resolved to %v: not monotone", seed, e.id, e.title, e.upward, results)
				}
			}
		}
		if counts[exclusive] == 0 || counts[ladder] == 0 {
			t.Fatalf("seed %d: %d exclusive events and %d ladders resolved in 25,000 changes, want some of each", seed, counts[exclusive], counts[ladder])
		}
	}
}

// TestResolutionFollowsFairValues checks that outcomes are drawn from the
// fair values, not by a coin: over many binary markets settled at once,
// the share of yes is close to the mean fair value.
func TestResolutionFollowsFairValues(t *testing.T) {
	g := newTestGenerator(t, 2_000, 9)
	now := testEpoch.Add(time.Hour)
	fair, yes, n := 0.0, 0, 0
	for _, e := range slices.Clone(g.liveEvents) {
		if e.kind != binary {
			continue
		}
		for _, m := range activeMarkets(e) {
			fair += m.p
			n++
		}
		g.resolveEvent(e, now)
		for _, m := range e.markets {
			if m.result == "yes" {
				yes++
			}
		}
	}
	if n < 300 {
		t.Fatalf("only %d binary markets", n)
	}
	if got, want := float64(yes)/float64(n), fair/float64(n); math.Abs(got-want) > 0.06 {
		t.Errorf("%.3f of %d binary markets settled yes, their mean fair value was %.3f", got, n, want)
	}
}

// TestTemplatesMakeSense draws many events of every template and size and
// checks that each is well formed and plausible: the model matches the
// labels, ladders are ascending, and weather is tied to each city's climate.
func TestTemplatesMakeSense(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 1; n <= maxMarketsPerEvent; n++ {
		made := map[kind]int{}
		for try := range 400 {
			now := testEpoch.AddDate(0, 0, 7*try%365)
			d, ok := pick(r, templates)(r, now, n)
			if !ok {
				continue
			}
			made[d.kind]++
			if len(d.labels) != n {
				t.Fatalf("%q: %d labels, want %d", d.title, len(d.labels), n)
			}
			if seen := map[string]bool{}; slices.ContainsFunc(d.labels, func(l string) bool { defer func() { seen[l] = true }(); return seen[l] || l == "" }) {
				t.Fatalf("%q: labels %q repeat or are empty", d.title, d.labels)
			}
			if strings.Contains(strings.Join(d.labels, ","), "Other") {
				t.Errorf("%q: placeholder labels %q", d.title, d.labels)
			}
			switch d.kind {
			case exclusive:
				if n < 2 {
					t.Errorf("%q: an exclusive event of %d outcome", d.title, n)
				}
			case ladder:
				if len(d.thresholds) != n || !slices.IsSorted(d.thresholds) || !(d.sd > 0) {
					t.Fatalf("%q: ladder thresholds %v, sd %v", d.title, d.thresholds, d.sd)
				}
				for i := 1; i < n; i++ {
					if d.thresholds[i] == d.thresholds[i-1] {
						t.Fatalf("%q: thresholds %v repeat", d.title, d.thresholds)
					}
				}
				// Counts, sizes and prices are positive; rates and temperatures may not be.
				if d.category != "economics" && !strings.HasPrefix(d.title, "Highest temperature") && d.thresholds[0] <= 0 {
					t.Errorf("%q: thresholds %v from %v", d.title, d.labels, d.thresholds[0])
				}
			}
			checkWeather(t, d)
			checkDates(t, now, d)
		}
		if made[exclusive]+made[ladder]+made[binary] == 0 {
			t.Fatalf("no template makes an event of %d markets", n)
		}
		if n >= 2 && n <= 6 && (made[exclusive] == 0 || made[ladder] == 0 || made[binary] == 0) {
			t.Errorf("%d markets per event: templates made %v, want every kind", n, made)
		}
	}
}

// checkWeather checks a weather draft against its city's climate: snowfall
// only in a city and month with snow, temperature ladders around the month's
// normal high.
func checkWeather(t *testing.T, d draft) {
	t.Helper()
	if d.category != "weather" {
		return
	}
	var c *city
	for i := range cities {
		if strings.Contains(d.title, " "+cities[i].name+" ") {
			c = &cities[i]
		}
	}
	if c == nil {
		t.Fatalf("%q: no known city", d.title)
	}
	switch {
	case strings.HasPrefix(d.title, "How much snow"):
		month := -1
		for m := time.January; m <= time.December; m++ {
			if strings.Contains(d.title, " "+m.String()+" ") {
				month = int(m) - 1
			}
		}
		if month < 0 || c.snowIn[month] < minSnowyMonth {
			t.Errorf("%q: %s gets no real snow then", d.title, c.name)
		}
	case strings.HasPrefix(d.title, "Highest temperature"):
		day, err := time.Parse(time.DateOnly, d.title[len(d.title)-len("2006-01-02?"):len(d.title)-1])
		if err != nil {
			t.Fatalf("%q: %v", d.title, err)
		}
		normal := c.highF[day.Month()-1]
		mid := d.thresholds[len(d.thresholds)/2]
		if math.Abs(mid-normal) > 20 || math.Abs(d.mu-normal) > 20 {
			t.Errorf("%q: thresholds %v around %.0f°F, the normal high is %.0f°F", d.title, d.thresholds, d.mu, normal)
		}
	default:
		t.Errorf("%q: an unknown weather title", d.title)
	}
}

var monthYearRE = regexp.MustCompile(`(January|February|March|April|May|June|July|August|September|October|November|December) \d{4}`)

// checkDates checks that the months a draft names are not in the past.
func checkDates(t *testing.T, now time.Time, d draft) {
	t.Helper()
	for _, s := range append([]string{d.title}, d.labels...) {
		for _, m := range monthYearRE.FindAllString(s, -1) {
			at, err := time.Parse("January 2006", m)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if at.Before(firstOfMonth(now)) {
				t.Fatalf("%q (in %q): %s is before %s", s, d.title, m, now.Format(time.DateOnly))
			}
		}
	}
}
