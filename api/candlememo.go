package api

import (
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/marketdata/marketdata/internal/notice"
)

// Candle answers are kept in node memory, whole and rendered, keyed by the
// query as the store reads it (market, interval, venue, aligned start and
// bucket count). A change notice that names the market (its prices or its
// trades: either can change a bucket) drops all of its answers; a flush
// drops everything; and an answer lives at most candleMemoTTL, the safety
// net for a lost notice (the contract's 2 s freshness bound).

const (
	// candleMemoSize bounds the answers kept; a 500-candle answer is some
	// 100 KB, so 1,024 of them bound memory at about 100 MB at worst.
	candleMemoSize = 1024
	// candleMemoTTL is how long an answer is kept without a notice.
	candleMemoTTL = 2 * time.Second
	// candleGens is how many generation slots markets hash into.
	candleGens = 1024
)

type candleKey struct {
	market, interval, venue string
	start                   int64
	n                       int
}

// String is the key as the fills' singleflight names it.
func (k candleKey) String() string {
	return k.market + "|" + k.interval + "|" + k.venue + "|" + strconv.FormatInt(k.start, 10) + "|" + strconv.Itoa(k.n)
}

type candleAnswer struct {
	body []byte
	tag  string
	at   time.Time
}

// candleMemo is the node's bounded store of candle answers.
type candleMemo struct {
	now  func() time.Time
	seed maphash.Seed

	mu       sync.Mutex
	answers  map[candleKey]candleAnswer
	byMarket map[string]map[candleKey]struct{}

	// fills runs one Postgres read a key at a time (api.candles).
	fills singleflight.Group

	// gens count the drops per slot of markets: a read that began before a
	// drop of its market (its slot moved) does not keep its answer, which
	// may predate the change.
	gens [candleGens]atomic.Uint64
}

func newCandleMemo(now func() time.Time) *candleMemo {
	return &candleMemo{
		now: now, seed: maphash.MakeSeed(),
		answers: map[candleKey]candleAnswer{}, byMarket: map[string]map[candleKey]struct{}{},
	}
}

func (m *candleMemo) slot(market string) *atomic.Uint64 {
	return &m.gens[maphash.String(m.seed, market)%candleGens]
}

// generation is the market's slot's count, to pass to put.
func (m *candleMemo) generation(market string) uint64 { return m.slot(market).Load() }

// get returns the answer kept for k, unless it is older than the TTL.
func (m *candleMemo) get(k candleKey) (candleAnswer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.answers[k]
	if !ok || m.now().Sub(a.at) >= candleMemoTTL {
		return candleAnswer{}, false
	}
	return a, true
}

// put keeps a for k unless its market was dropped since gen was read. A
// full memo first drops its expired answers, then, if still full, any one.
func (m *candleMemo) put(k candleKey, a candleAnswer, gen uint64) {
	now := m.now()
	a.at = now
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slot(k.market).Load() != gen {
		return
	}
	if _, ok := m.answers[k]; !ok && len(m.answers) >= candleMemoSize {
		for old, o := range m.answers {
			if now.Sub(o.at) >= candleMemoTTL {
				m.remove(old)
			}
		}
		for old := range m.answers {
			if len(m.answers) < candleMemoSize {
				break
			}
			m.remove(old)
		}
	}
	m.answers[k] = a
	keys := m.byMarket[k.market]
	if keys == nil {
		keys = map[candleKey]struct{}{}
		m.byMarket[k.market] = keys
	}
	keys[k] = struct{}{}
}

func (m *candleMemo) remove(k candleKey) {
	delete(m.answers, k)
	if keys := m.byMarket[k.market]; keys != nil {
		delete(keys, k)
		if len(keys) == 0 {
			delete(m.byMarket, k.market)
		}
	}
}

// drop forgets every answer of the markets.
func (m *candleMemo) drop(markets []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range markets {
		m.slot(id).Add(1)
		for k := range m.byMarket[id] {
			delete(m.answers, k)
		}
		delete(m.byMarket, id)
	}
}

// flush forgets every answer.
func (m *candleMemo) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.gens {
		m.gens[i].Add(1)
	}
	clear(m.answers)
	clear(m.byMarket)
}

// notice applies a change notice (cache.Reader.OnChange).
func (m *candleMemo) notice(n notice.Change) {
	if n.Flush {
		m.flush()
		return
	}
	if len(n.Markets) > 0 {
		m.drop(n.Markets)
	}
	if len(n.Trades) > 0 {
		m.drop(n.Trades)
	}
}
