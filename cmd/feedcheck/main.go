// Command feedcheck computes the coherence figures of the synthetic
// feed from its messages alone (run on old and new code alike).
package main

import (
	"flag"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
	"github.com/marketdata/marketdata/store"
)

type mk struct {
	ev, title, status, result string
	price                     *store.Price
	matches                   store.Matches
}

var num = regexp.MustCompile(`[-]?[0-9][0-9,]*\.?[0-9]*`)

func main() {
	events := flag.Int("events", 200, "")
	steps := flag.Int("steps", 50000, "")
	seed := flag.Uint64("seed", 1, "")
	flag.Parse()
	now := time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)
	g := feed.NewGenerator(feed.GenConfig{Events: *events, Seed: *seed, Now: func() time.Time { now = now.Add(time.Millisecond); return now }})
	evTitle := map[string]string{}
	evStatus := map[string]string{}
	markets := map[string]*mk{}
	var order []string
	afterRes := 0
	apply := func(m feed.Msg) {
		u, err := ingest.Decode(ingest.DefaultSubjectPrefix, m.Subject, m.Data)
		if err != nil {
			panic(err)
		}
		switch u.Kind {
		case ingest.KindEvent:
			evTitle[u.Event.ID], evStatus[u.Event.ID] = u.Event.Title, u.Event.Status
		case ingest.KindMarket:
			x := markets[u.Market.ID]
			if x == nil {
				x = &mk{}
				markets[u.Market.ID] = x
				order = append(order, u.Market.ID)
			}
			x.ev, x.title, x.status, x.matches = u.Market.EventID, u.Market.Title, u.Market.Status, u.Market.Matches
			if u.Market.Result != nil {
				x.result = *u.Market.Result
			}
		case ingest.KindPrice:
			x := markets[u.Price.MarketID]
			// A complement venue's quotes, in the market's terms as the
			// service shows them (no generator before match metadata had any).
			for venue, q := range u.Price.Quotes {
				if x.matches.Inverted(store.VenueIndex(venue)) {
					u.Price.Quotes[venue] = q.Invert()
				}
			}
			if x.status == store.StatusResolved && !resolvedPrice(u.Price) {
				afterRes++
			}
			x.price = u.Price
		case ingest.KindTrade:
			if markets[u.Trade.MarketID].status == store.StatusResolved {
				afterRes++
			}
		}
	}
	for _, m := range g.Initial() {
		apply(m)
	}
	report("initial", evTitle, evStatus, markets, order, 0)
	for range *steps {
		apply(g.Next())
	}
	report(fmt.Sprintf("after %d changes", *steps), evTitle, evStatus, markets, order, afterRes)
}

// resolvedPrice: a price that already shows the settlement (no bid, no ask).
func resolvedPrice(p *store.Price) bool {
	for _, q := range p.Quotes {
		if q.Bid != nil || q.Ask != nil {
			return false
		}
	}
	return true
}

func mid(p *store.Price) (float64, bool) {
	s, n := 0.0, 0
	for _, q := range p.Quotes {
		if q.Bid != nil && q.Ask != nil {
			s += (*q.Bid + *q.Ask) / 2
			n++
		}
	}
	return s / float64(max(n, 1)), n > 0
}

func exclusiveTitle(t string) bool {
	for _, p := range []string{"Who will win", "Which film wins", "Top song", "who wins on", "What will "} {
		if strings.Contains(t, p) {
			return true
		}
	}
	return false
}

func report(when string, evTitle, evStatus map[string]string, markets map[string]*mk, order []string, afterRes int) {
	byEv := map[string][]*mk{}
	var evOrder []string
	for _, id := range order {
		x := markets[id]
		if _, ok := byEv[x.ev]; !ok {
			evOrder = append(evOrder, x.ev)
		}
		byEv[x.ev] = append(byEv[x.ev], x)
	}
	var sums []float64
	inverted, ladders := 0, 0
	crossed, multi := 0, 0
	resolvedMid, resolved := 0, 0
	var gaps []float64
	for _, ev := range evOrder {
		if evStatus[ev] != store.StatusActive {
			continue
		}
		ms := byEv[ev]
		t := evTitle[ev]
		var act []*mk
		for _, x := range ms {
			if x.status == store.StatusActive && x.price != nil {
				act = append(act, x)
			}
		}
		if exclusiveTitle(t) && len(act) >= 2 && len(act) == countActive(ms) {
			s := 0.0
			for _, x := range act {
				v, _ := mid(x.price)
				s += v
			}
			sums = append(sums, s)
		}
		// ladders: every label has a number, "above/more/or more/+" (down) or "By/Before" (up)
		dir := 0
		var th []float64
		for _, x := range act {
			l := x.title
			switch {
			case strings.HasPrefix(l, "Above") || strings.Contains(l, "or above") || strings.Contains(l, "or more") || strings.HasPrefix(l, "More than") || strings.HasSuffix(l, "+"):
				dir = -1
			default:
				dir = 99
			}
			s := strings.ReplaceAll(num.FindString(l), ",", "")
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				dir = 99
			}
			th = append(th, v)
		}
		if dir == -1 && len(act) >= 2 && !strings.Contains(t, "vs") {
			ladders++
			idx := make([]int, len(act))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int { return int(math.Copysign(1, th[a]-th[b])) })
			bad := false
			for i := 1; i < len(idx); i++ {
				a, _ := mid(act[idx[i-1]].price)
				b, _ := mid(act[idx[i]].price)
				if b > a+0.02 {
					bad = true
				}
			}
			if bad {
				inverted++
			}
		}
	}
	for _, id := range order {
		x := markets[id]
		if x.price == nil || evStatus[x.ev] == store.StatusMerged {
			continue
		}
		if x.status == store.StatusResolved {
			resolved++
			if v, ok := mid(x.price); ok && v > 0.05 && v < 0.95 {
				resolvedMid++
			}
			continue
		}
		if len(x.price.Quotes) < 2 || evStatus[x.ev] != store.StatusActive {
			continue
		}
		multi++
		bb, ba := -1.0, 2.0
		for _, q := range x.price.Quotes {
			bb, ba = math.Max(bb, *q.Bid), math.Min(ba, *q.Ask)
		}
		if bb > ba {
			crossed++
			gaps = append(gaps, bb-ba)
		}
	}
	slices.Sort(sums)
	slices.Sort(gaps)
	fmt.Printf("== %s\n", when)
	if len(sums) > 0 {
		in := 0
		for _, s := range sums {
			if s >= 0.95 && s <= 1.05 {
				in++
			}
		}
		fmt.Printf("exclusive events: %d, sum of mids min %.2f median %.2f max %.2f, within [0.95,1.05]: %d\n", len(sums), sums[0], sums[len(sums)/2], sums[len(sums)-1], in)
	}
	fmt.Printf("ladders: %d, inverted (a higher threshold's mid >2c above a lower one's): %d\n", ladders, inverted)
	g := 0.0
	if len(gaps) > 0 {
		g = gaps[len(gaps)-1]
	}
	fmt.Printf("active markets on >=2 venues: %d, crossed: %d (%.1f%%), largest gap %.3f\n", multi, crossed, 100*float64(crossed)/float64(max(multi, 1)), g)
	fmt.Printf("resolved markets: %d, with a mid-range (0.05..0.95) quote: %d; price/trade messages after resolution: %d\n", resolved, resolvedMid, afterRes)
	nonsense := 0
	for _, t := range evTitle {
		if strings.Contains(t, "snow") {
			for _, c := range []string{"Miami", "Los Angeles", "Austin", "May", "June", "July", "August", "September"} {
				if strings.Contains(t, c) {
					nonsense++
					break
				}
			}
		}
	}
	fmt.Printf("snow titles in a snowless city or summer month: %d of %d events\n", nonsense, len(evTitle))
}

func countActive(ms []*mk) int {
	n := 0
	for _, x := range ms {
		if x.status == store.StatusActive {
			n++
		}
	}
	return n
}
