package main

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// popularity draws markets by Zipf-distributed popularity: rank k (0 = the
// most popular) has weight (V+k)^-S, and ranks map to markets through a
// fixed random permutation, so popular markets are spread over events.
// Watchlists and price updates draw from the same popularity with their own
// sources, so the markets pollers watch are the ones that change.
type popularity struct {
	S, V   float64
	byRank []int32 // market index of each rank
}

// newPopularity ranks markets markets for the seed.
func newPopularity(markets int, s, v float64, seed uint64) (*popularity, error) {
	if s <= 1 || v < 1 || markets < 1 {
		return nil, fmt.Errorf("zipf needs s > 1, v ≥ 1 and markets: s=%g v=%g markets=%d", s, v, markets)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	p := &popularity{S: s, V: v, byRank: make([]int32, markets)}
	for rank, m := range r.Perm(markets) {
		p.byRank[rank] = int32(m)
	}
	return p, nil
}

// newRand is a source fixed by seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// drawer returns a source of market indexes with this popularity.
func (p *popularity) drawer(r *rand.Rand) func() int32 {
	z := rand.NewZipf(r, p.S, p.V, uint64(len(p.byRank)-1))
	return func() int32 { return p.byRank[z.Uint64()] }
}

// watchlists draws n lists of size distinct markets each, in draw order
// (the snapshot answers in request order, whatever it is).
func (p *popularity) watchlists(n, size int, seed uint64) [][]int32 {
	draw := p.drawer(rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d)))
	out := make([][]int32, n)
	for i := range out {
		seen := make(map[int32]bool, size)
		for len(out[i]) < size {
			if m := draw(); !seen[m] {
				seen[m] = true
				out[i] = append(out[i], m)
			}
		}
	}
	return out
}

// updateSchedule is the publisher's plan and record: update n goes to
// market Market[n] at the version after that market's previous one (the
// world holds version 1, so a market's first update is version 2). Its
// publish time is stored when it is sent and read by the pollers'
// accounting, from any goroutine.
type updateSchedule struct {
	start   time.Time
	Market  []int32
	Version []int64
	// off and byMarket list each market's updates in version order: market
	// m's version v is update byMarket[off[m]+v-2].
	off      []int32
	byMarket []int32
	// pubAt is each update's publish time in ns since start, plus 1 (0:
	// not published).
	pubAt []atomic.Int64
}

// newSchedule plans n updates over markets markets, each drawn by draw.
func newSchedule(start time.Time, markets, n int, draw func() int32) *updateSchedule {
	s := &updateSchedule{start: start, Market: make([]int32, n), Version: make([]int64, n),
		off: make([]int32, markets+1), byMarket: make([]int32, n), pubAt: make([]atomic.Int64, n)}
	count := make([]int32, markets)
	for i := range n {
		m := draw()
		s.Market[i] = m
		count[m]++
		s.Version[i] = 1 + int64(count[m])
	}
	for m := range markets {
		s.off[m+1] = s.off[m] + count[m]
	}
	for i, m := range s.Market {
		s.byMarket[s.off[m]+int32(s.Version[i]-2)] = int32(i)
	}
	return s
}

// Published records update n's publish time; call it before publishing.
func (s *updateSchedule) Published(n int, at time.Time) {
	s.pubAt[n].Store(int64(at.Sub(s.start)) + 1)
}

// since is t in the schedule's clock (ns since start).
func (s *updateSchedule) since(t time.Time) int64 { return int64(t.Sub(s.start)) }

// pubTime is when market m's version v was published (ns since start);
// ok is false for a version this schedule never published (yet).
func (s *updateSchedule) pubTime(m int32, v int64) (ns int64, ok bool) {
	i := int64(s.off[m]) + v - 2
	if v < 2 || i >= int64(s.off[m+1]) {
		return 0, false
	}
	at := s.pubAt[s.byMarket[i]].Load()
	return at - 1, at != 0
}

// Poller is one client: its watchlist, its key, and what it has seen. Only
// the connection that holds it (see pollRun) touches it.
type Poller struct {
	N       int
	Markets []int32
	IDs     []string
	// path is the snapshot URL of the watchlist, auth its Authorization.
	path, auth string
	// next is the node of its next poll: consecutive polls alternate.
	next int
	// etag is the ETag of the last 200 it received, from any node.
	etag []byte
	// seen, seenNode and seenAt are, per watched market, the highest
	// version any answer showed it, the node that showed it first and when
	// (ns since the schedule's start).
	seen     []int64
	seenNode []int8
	seenAt   []int64
	// versions is scratch for the versions of one answer.
	versions []int64
	// shown are the versions of the last accounted 200, the one its ETag
	// names: what a 304 to that ETag shows.
	shown []int64
	// lastSent is the start of its previous request of the run (ns since
	// the schedule's start; 0: none yet).
	lastSent int64
}

// snapshotPath is the snapshot URL of ids.
func snapshotPath(ids []string) string {
	return "/public/v1/prices/snapshot?ids=" + strings.Join(ids, ",")
}

// newPollers makes a poller of each watchlist, naming markets with ids and
// giving poller i the key secrets[i % len(secrets)].
func newPollers(lists [][]int32, ids func(int32) string, secrets []string) []*Poller {
	out := make([]*Poller, len(lists))
	for i, l := range lists {
		p := &Poller{N: i, Markets: l, IDs: make([]string, len(l)), next: i % 2, auth: "Bearer " + secrets[i%len(secrets)],
			seen: make([]int64, len(l)), seenNode: make([]int8, len(l)), seenAt: make([]int64, len(l)), versions: make([]int64, len(l)),
			shown: make([]int64, len(l))}
		for j, m := range l {
			p.IDs[j] = ids(m)
		}
		p.path = snapshotPath(p.IDs)
		out[i] = p
	}
	return out
}

// answerStaleness is how stale an answer's price of market m was when its
// request started (ns): start minus the publish time of the newest version
// published before start that the answer does not show, or 0 when the answer
// shows that version or a newer one (start and the result in ns since the
// schedule's start). The schedule is the per-market history the lookup
// needs: every planned version of each market in version order, with its
// publish time once sent, bounded by the plan.
//
// A market's versions are published in version order, so "published before
// start" holds for a prefix of them and a binary search finds the newest.
func (s *updateSchedule) answerStaleness(m int32, shown, start int64) int64 {
	shown = max(shown, 1) // the world holds version 1; the schedule starts at 2
	before := func(v int64) (int64, bool) {
		pub, ok := s.pubTime(m, v)
		return pub, ok && pub < start
	}
	// The common case, an answer that is current: the next version was
	// not yet published when the request started.
	if _, ok := before(shown + 1); !ok {
		return 0
	}
	planned := int64(s.off[m+1] - s.off[m]) // versions 2 .. planned+1
	// k counts versions after shown+1: the first k for which version
	// shown+2+k was not published before start.
	k := sort.Search(int(planned+1-(shown+1)), func(k int) bool {
		_, ok := before(shown + 2 + int64(k))
		return !ok
	})
	pub, _ := before(shown + 1 + int64(k))
	return start - pub
}

// update is the schedule index of market m's version v; ok is false for a
// version the schedule does not plan.
func (s *updateSchedule) update(m int32, v int64) (n int, ok bool) {
	i := int64(s.off[m]) + v - 2
	if v < 2 || i >= int64(s.off[m+1]) {
		return 0, false
	}
	return int(s.byMarket[i]), true
}

// unpublish forgets update n's publish time: it was stamped but the
// publisher stopped before handing it to JetStream.
func (s *updateSchedule) unpublish(n int) { s.pubAt[n].Store(0) }

// latest is market m's newest published version (1, the world's, when none
// was published).
func (s *updateSchedule) latest(m int32) int64 {
	v := int64(1)
	for {
		if _, ok := s.pubTime(m, v+1); !ok {
			return v
		}
		v++
	}
}
