package feed

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// Defaults of GenConfig's zero fields.
const (
	DefaultEvents     = 100
	DefaultMinMarkets = 2
	DefaultMaxMarkets = 6
)

const (
	maxMarketsPerEvent = 50
	// seedSalt derives the PCG's second word from the seed.
	seedSalt = 0x9e3779b97f4a7c15
	// runSalt derives the changes' PCG words from the seed and the run.
	runSalt = 0xd1b54a32d192ed03
	// eventSalt derives an added event's PCG words from the seed and the
	// event's number.
	eventSalt = 0x94d049bb133111eb
)

// GenConfig configures a Generator. Zero fields take the defaults noted.
type GenConfig struct {
	// Events is the number of events in the initial world, and the number of
	// live events the generator keeps around as events resolve and merge
	// (default DefaultEvents).
	Events int
	// Seed makes the initial world reproducible: the same Seed gives the same
	// events, markets, titles and venue ids. The changes that follow depend on
	// the Seed and on the clock's reading at NewGenerator (the run), so that a
	// restarted feed goes on with new moves and trades instead of replaying
	// the earlier run's; the same Seed and clock give the same messages, byte
	// for byte.
	Seed uint64
	// MarketsPerEvent is the inclusive range of markets per event (default
	// 2..6; at most 50).
	MarketsPerEvent [2]int
	// Now is the clock that stamps messages and paces the hot set (default
	// time.Now). The version base and the run's tag are taken from it once,
	// at NewGenerator.
	Now func() time.Time
	// SubjectPrefix is the subject prefix (default
	// ingest.DefaultSubjectPrefix).
	SubjectPrefix string
	// EventLife, when positive, paces the world's lifecycle by the clock
	// (life.go): market and event resolutions, merges and new events come
	// about once per live event per EventLife, so markets live hours and a
	// market's candles over the last hours show it trading. Zero leaves
	// the lifecycle to the message stream, 3% of the changes: at `marketdata
	// dev`'s 50 messages a second a market then lives about four minutes,
	// which tests use to meet every kind of change within seconds.
	EventLife time.Duration
}

// Msg is one message ready to publish.
type Msg struct {
	// Subject is "<prefix>.<kind>.<id>".
	Subject string
	// Data is the JSON body.
	Data []byte
	// MsgID is the Nats-Msg-Id: "<kind>.<id>.<version>" for events, markets
	// and prices, "trade.<trade_id>" for trades; unique per distinct message.
	MsgID string
}

// Generator is a deterministic synthetic matcher: it holds a world of events,
// markets, quotes and trades and emits its changes as ingest messages. It is
// not safe for concurrent use.
type Generator struct {
	cfg   GenConfig
	pcg   *rand.PCG // rng's source: the seed's while the world is built, then the run's
	rng   *rand.Rand
	ids   *venueIDs
	epoch time.Time // the clock at creation; event dates are after it
	// base is added to every version: the clock in microseconds at creation,
	// so a restarted feed supersedes whatever an earlier run left in the
	// store, while each entity's version still grows by one per change.
	base int64
	// runTag is base in base 36: it makes trade ids unique across
	// restarts, like base.
	runTag   string
	built    bool // the initial world is made: new events are drawn on their own
	tradeSeq int64

	// The hot set (hot.go).
	hot         []*market
	hotStale    bool      // the set may have changed: pick it again
	hotLast     bool      // the last change was a hot one
	hotTradeDue time.Time // when the next trade on a hot market is due

	lifeDue time.Time // when EventLife is set: when the next lifecycle change is due

	titles      map[string]bool
	events      []*event // every event, in creation order
	markets     []*market
	liveEvents  []*event  // active events
	liveMarkets []*market // active markets of active events: those that trade
	pending     []Msg     // the rest of a change that spans several messages
}

// NewGenerator builds the initial world of cfg.Events events. Out-of-range
// settings are brought into range rather than refused: a non-positive Events
// means DefaultEvents, MarketsPerEvent is clamped to 1..50 with min ≤ max.
func NewGenerator(cfg GenConfig) *Generator {
	if cfg.Events <= 0 {
		cfg.Events = DefaultEvents
	}
	if cfg.MarketsPerEvent == [2]int{} {
		cfg.MarketsPerEvent = [2]int{DefaultMinMarkets, DefaultMaxMarkets}
	}
	lo := max(1, min(cfg.MarketsPerEvent[0], maxMarketsPerEvent))
	hi := max(lo, min(cfg.MarketsPerEvent[1], maxMarketsPerEvent))
	cfg.MarketsPerEvent = [2]int{lo, hi}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = ingest.DefaultSubjectPrefix
	}

	pcg := rand.NewPCG(cfg.Seed, cfg.Seed^seedSalt)
	rng := rand.New(pcg)
	epoch := cfg.Now().UTC()
	g := &Generator{
		cfg:    cfg,
		pcg:    pcg,
		rng:    rng,
		ids:    newVenueIDs(rng),
		epoch:  epoch,
		base:   max(0, epoch.UnixMicro()),
		titles: make(map[string]bool),
	}
	g.runTag = strconv.FormatInt(g.base, 36)
	for range cfg.Events {
		g.newEvent(epoch)
	}
	// From here on the draws are the run's own: a restart (a later clock)
	// makes other moves and trades than the run before it, from the same
	// initial world, instead of the same ones again under new ids.
	pcg.Seed(cfg.Seed^runSalt, uint64(g.base)^seedSalt)
	g.built = true
	g.hotTradeDue = epoch
	if cfg.EventLife > 0 {
		g.lifeDue = epoch.Add(g.lifeGap())
	}
	for _, e := range g.events {
		g.eventMsg(e)
	}
	for _, m := range g.markets {
		g.marketMsg(m)
		g.priceMsg(m)
	}
	return g
}

// Initial returns the full state: every event, then every market, then one
// price per market. Each is the latest message sent for that entity (or, at
// first, its initial state), byte for byte, with the same MsgID: replaying
// Initial at any time lets a new consumer catch up, while JetStream and
// ingest ignore what they already have. Called while Next is in the middle
// of a change that spans several messages, Initial already holds the
// change's messages that Next has yet to return (Next returns them later
// with the same MsgID, so they are deduplicated).
func (g *Generator) Initial() []Msg {
	out := make([]Msg, 0, len(g.events)+2*len(g.markets))
	for _, e := range g.events {
		out = append(out, e.lastMsg)
	}
	for _, m := range g.markets {
		out = append(out, m.lastMsg)
	}
	for _, m := range g.markets {
		out = append(out, m.lastPrice)
	}
	return out
}

// Next returns the next message of the world's changes: about 80% of the
// messages are price updates, 15% trades, and the rest market resolutions
// (each with its settlement price), event updates (volume, a new venue
// listing), merges, event resolutions and new events. The hot set's prices
// and trades (hot.go) go first whenever they are due by the clock, and so
// do the lifecycle changes when EventLife paces them (life.go). A change
// that spans several messages (a new event with its markets, a resolution,
// a price move that reprices an event's other markets) is returned over
// consecutive calls.
func (g *Generator) Next() Msg {
	if len(g.pending) == 0 {
		if now := g.cfg.Now().UTC(); !g.hotChange(now) {
			g.change(now)
		}
	}
	m := g.pending[0]
	g.pending = g.pending[1:]
	if len(g.pending) == 0 {
		g.pending = nil // let the backing array go
	}
	return m
}

func (g *Generator) emit(msgs ...Msg) { g.pending = append(g.pending, msgs...) }

// change makes one random change and queues its messages.
func (g *Generator) change(now time.Time) {
	if len(g.liveMarkets) == 0 {
		g.addEvent(now)
		return
	}
	if g.lifeChange(now) {
		return
	}
	switch x := g.rng.Float64(); {
	case x < 0.77:
		g.priceChange(pick(g.rng, g.liveMarkets), now)
	case x < 0.97:
		g.emit(g.tradeMsg(g.tradeOn(pick(g.rng, g.liveMarkets), now)))
	default:
		g.rareChange(now)
	}
}
