package world

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/marketdata/marketdata/ingest/feed"
	"github.com/marketdata/marketdata/store"
)

// ReadsWorld is the data the reads benchmark serves: active events listed on
// two to four venues (so every one is served), PerEvent active markets per
// event and one price per market.
//
// ingest/feed's generator would do, but it was made for a few thousand
// events: at 50,000 its unique titles and venue ids take tens of seconds.
// This one builds the store's types directly, in the same shapes: titles
// from templates over real team, city and country names, categories,
// log-normal volumes, venue ids shaped like each venue's, quotes per venue.
type ReadsWorld struct {
	Events []store.Event
	// Markets and Prices hold PerEvent entries per event, in event order.
	Markets  []store.Market
	Prices   []store.Price
	PerEvent int
	// At is when the world was made: it stamps every row.
	At time.Time
}

// NewReadsWorld builds events events of perEvent markets, the same for the
// same seed (but for the timestamps, which are now).
func NewReadsWorld(events, perEvent int, seed uint64) *ReadsWorld {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := time.Now().UTC().Truncate(time.Microsecond)
	w := &ReadsWorld{PerEvent: perEvent, At: now}
	w.Events = make([]store.Event, 0, events)
	w.Markets = make([]store.Market, 0, events*perEvent)
	w.Prices = make([]store.Price, 0, events*perEvent)
	for n := 1; n <= events; n++ {
		t := readsTemplates[r.IntN(len(readsTemplates))](r, now.AddDate(0, 0, 1+r.IntN(500)))
		e := store.Event{
			ID: fmt.Sprintf("ev_%06d", n), Version: 1, Title: t.title, Category: t.category,
			Status: store.StatusActive, Volume: math.Round(100*math.Exp(10+1.4*r.NormFloat64())) / 100, UpdatedAt: now,
		}
		venues := r.Perm(len(store.Venues))[:2+r.IntN(3)]
		for _, v := range venues {
			id := venueEventID(v, n, t)
			e.VenueIDs[v] = &id
		}
		w.Events = append(w.Events, e)
		for j := range perEvent {
			label := fmt.Sprintf("Other %d", j+1)
			if j < len(t.labels) {
				label = t.labels[j]
			}
			m := store.Market{
				ID: fmt.Sprintf("mk_%06d_%02d", n, j+1), EventID: e.ID, Version: 1, Title: label,
				Status: store.StatusActive, Venues: map[string]string{}, UpdatedAt: now,
			}
			p := store.Price{MarketID: m.ID, Version: 1, TS: now, Quotes: map[string]store.Quote{}}
			fair := 1 / (1 + math.Exp(-1.3*r.NormFloat64()))
			for _, v := range venues {
				m.Venues[store.Venues[v]] = venueMarketID(v, *e.VenueIDs[v], n, j, label)
				mid := math.Max(0.02, math.Min(0.98, fair+0.012*r.NormFloat64()))
				spread := 0.01 * float64(1+r.IntN(3))
				bid, ask := cents(mid-spread/2), cents(mid+spread/2)
				last := cents(bid + (ask-bid)*r.Float64())
				p.Quotes[store.Venues[v]] = store.Quote{Bid: &bid, Ask: &ask, Last: &last,
					Volume24h: math.Round(math.Exp(7 + 1.2*r.NormFloat64()))}
			}
			w.Markets, w.Prices = append(w.Markets, m), append(w.Prices, p)
		}
	}
	return w
}

// venueEventID is event n's id on venue v: a venue_a ticker, a venue_b
// slug, a venue_c number, a venue_d hex id. The event number keeps ids
// unique per venue, as the contract needs of venue ids.
func venueEventID(v, n int, t readsDraft) string {
	switch v {
	case 0:
		return fmt.Sprintf("KX%s-%s-%d", t.stem, t.code, n)
	case 1:
		return fmt.Sprintf("%s-%d", feed.Slugify(t.title, 52), n)
	case 2:
		return fmt.Sprint(1_000_000 + n)
	default:
		return fmt.Sprintf("0x%016x", uint64(n)*0x9e3779b97f4a7c15)
	}
}

func venueMarketID(v int, eventID string, n, j int, label string) string {
	switch v {
	case 0:
		code := strings.ToUpper(strings.ReplaceAll(feed.Slugify(label, 12), "-", ""))
		return eventID + "-" + cmp.Or(code, "M")
	case 1:
		return fmt.Sprintf("%s-%d-%d", feed.Slugify(label, 40), n, j+1)
	case 2:
		return fmt.Sprint(100_000_000 + 10*n + j)
	default:
		return fmt.Sprintf("0x%016x", (uint64(n)<<4|uint64(j))*0xbf58476d1ce4e5b9)
	}
}

// readsDraft is an invented event: title, category, the parts of its
// venue_a ticker and its market labels.
type readsDraft struct {
	title, category, stem, code string
	labels                      []string
}

var (
	rwTeams     = []string{"Lakers", "Celtics", "Warriors", "Knicks", "Chiefs", "Eagles", "Yankees", "Dodgers", "Arsenal", "Liverpool", "Chelsea", "Packers", "Bulls", "Heat"}
	rwLeagues   = []string{"NBA", "NFL", "MLB", "Premier League", "NHL", "Champions League"}
	rwStates    = []string{"Georgia", "Arizona", "Pennsylvania", "Michigan", "Nevada", "Wisconsin", "Ohio", "North Carolina", "Texas", "Florida"}
	rwCountries = []string{"Germany", "France", "Japan", "Canada", "Italy", "Spain", "the Netherlands", "Australia", "Brazil", "India"}
	rwCities    = []string{"New York", "Chicago", "Los Angeles", "Miami", "Denver", "Austin", "Seattle", "Boston", "Philadelphia", "Minneapolis"}
	rwCoins     = []string{"Bitcoin", "Ethereum", "Solana", "XRP"}
	rwBanks     = []string{"the Fed", "the ECB", "the Bank of England", "the Bank of Japan"}
	rwParties   = []string{"Social Democrats", "Conservatives", "Greens", "Liberals", "Labour Party"}
	rwPeople    = []string{"Maria Alvarez", "James Whitfield", "Dana Okafor", "Robert Brennan", "Aisha Castillo", "Daniel Lindqvist", "Elena Harper", "Marcus Nakamura"}
	rwAgencies  = []string{"NASA", "SpaceX", "ESA", "ISRO", "Blue Origin", "JAXA"}
)

func pickOne(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func pickN(r *rand.Rand, xs []string, n int) []string {
	out := make([]string, 0, n)
	for _, i := range r.Perm(len(xs))[:min(n, len(xs))] {
		out = append(out, xs[i])
	}
	return out
}

func thresholds(format string, start, step float64) []string {
	out := make([]string, 5)
	for i := range out {
		out[i] = fmt.Sprintf(format, start+step*float64(i))
	}
	return out
}

func upperCode(d time.Time) string { return strings.ToUpper(d.Format("06Jan02")) }

// readsTemplates invent one event dated d. Two of the thirteen say
// "election", none at the start: the benchmark's search query.
var readsTemplates = []func(r *rand.Rand, d time.Time) readsDraft{
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Will %s cut rates in %s?", pickOne(r, rwBanks), d.Format("January 2006")), "economics", "RATECUT", upperCode(d),
			[]string{"Cut 50+ bps", "Cut 25 bps", "No change", "Hike 25 bps", "Hike 50+ bps"}}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("US CPI inflation for %s?", d.Format("January 2006")), "economics", "CPIYOY", upperCode(d),
			thresholds("Above %.1f%%", 1.6+0.1*float64(r.IntN(10)), 0.2)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		st := pickOne(r, rwStates)
		return readsDraft{fmt.Sprintf("Who will win the %d %s governor race?", d.Year(), st), "politics", "GOV", upperCode(d), pickN(r, rwPeople, 5)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		c := pickOne(r, rwCountries)
		return readsDraft{fmt.Sprintf("Will %s hold a snap election before %s?", c, d.Format("January 2006")), "politics", "SNAP", upperCode(d),
			[]string{"By March", "By June", "By September", "By December", "Not this year"}}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("How many seats will the %s win in the %d %s election?", pickOne(r, rwParties), d.Year(), pickOne(r, rwCountries)),
			"politics", "SEATS", upperCode(d), thresholds("%.0f or more seats", float64(40+10*r.IntN(6)), 20)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		ts := pickN(r, rwTeams, 2)
		return readsDraft{fmt.Sprintf("%s vs %s: who wins on %s?", ts[0], ts[1], d.Format(time.DateOnly)), "sports", "GAME", upperCode(d),
			[]string{ts[0], ts[1], "Over 210.5 points", "Under 210.5 points", "Overtime"}}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Who will win the %d %s championship?", d.Year(), pickOne(r, rwLeagues)), "sports", "CHAMP", upperCode(d), pickN(r, rwTeams, 5)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("%s price on %s?", pickOne(r, rwCoins), d.Format(time.DateOnly)), "crypto", "COIN", upperCode(d),
			thresholds("Above $%.0f", float64(90_000+2_500*r.IntN(8)), 2_500)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Highest temperature in %s on %s?", pickOne(r, rwCities), d.Format(time.DateOnly)), "weather", "HIGH", upperCode(d),
			thresholds("%.0f°F or above", float64(40+2*r.IntN(20)), 2)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("How much snow will fall in %s in %s?", pickOne(r, rwCities), d.Format("January 2006")), "weather", "SNOW", upperCode(d),
			thresholds("More than %.0f inches", 1, 2)}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Which film wins Best Picture at the %d Oscars?", d.Year()), "entertainment", "OSCARPIC", upperCode(d),
			[]string{"The Silent Harbor", "The Golden Orchard", "Paper Kingdom", "Electric Summer", "The Distant Garden"}}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Will %s launch its next crewed mission before %s?", pickOne(r, rwAgencies), d.Format("January 2006")), "science", "LAUNCH", upperCode(d),
			[]string{"Before March", "Before June", "Before September", "Before December", "Not this year"}}
	},
	func(r *rand.Rand, d time.Time) readsDraft {
		return readsDraft{fmt.Sprintf("Will a major earthquake hit %s in %s?", pickOne(r, []string{"California", "Japan", "Chile", "Alaska", "Turkey"}), d.Format("January 2006")),
			"science", "QUAKE", upperCode(d), thresholds("Magnitude %.1f+", 5.5, 0.5)}
	},
}

// The reads benchmark's data and requests: the figures. It is the
// static-read figure: each route asks for one fixed URL while nothing
// changes, so the node's in-memory caches always hit; the poll benchmark
// measures what pollers whose markets change see.
const (
	ReadsEvents   = 50_000
	ReadsPerEvent = 5
	ReadsBatch    = 1000
	ReadsWorkers  = 4
	// ReadsSeed fixes the world and the requests, so runs compare.
	ReadsSeed = 20261122
	// readsSnapshotIDs is how many market ids a snapshot asks for (the API's
	// maximum).
	readsSnapshotIDs = 50
	// ReadsQuery is a common word of the feed's titles that none begins with:
	// a search scans every title and finds a few thousand matches.
	ReadsQuery = "election"
)

// ReadsInputs are the requests the benchmark makes, fixed by readsSeed.
type ReadsInputs struct {
	Seed             uint64   `json:"seed"`
	SnapshotIDs      []string `json:"snapshot_ids"`
	EventID          string   `json:"event_id"`
	Query            string   `json:"search_query"`
	TitlesContaining int      `json:"titles_containing_query"`
	TitlesStarting   int      `json:"titles_starting_with_query"`
	// CandleMarkets get a candle history (candles.go); the route reads the
	// first one's.
	CandleMarkets []string `json:"candle_markets"`
}

// ReadsInputsOf draws the snapshot's market ids, the event read's id and
// the markets with a candle history.
func ReadsInputsOf(w *ReadsWorld) ReadsInputs {
	r := rand.New(rand.NewPCG(ReadsSeed, ReadsSeed))
	in := ReadsInputs{Seed: ReadsSeed, Query: ReadsQuery, EventID: w.Events[r.IntN(len(w.Events))].ID}
	for _, i := range r.Perm(len(w.Markets))[:readsSnapshotIDs] {
		in.SnapshotIDs = append(in.SnapshotIDs, w.Markets[i].ID)
	}
	for _, i := range r.Perm(len(w.Markets))[:min(CandleMarkets, len(w.Markets))] {
		in.CandleMarkets = append(in.CandleMarkets, w.Markets[i].ID)
	}
	in.TitlesContaining, in.TitlesStarting = w.countContaining(ReadsQuery)
	return in
}
