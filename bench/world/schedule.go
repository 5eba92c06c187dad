package world

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

// NewPopularity ranks markets markets for the seed.
func NewPopularity(markets int, s, v float64, seed uint64) (*popularity, error) {
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

// NewRand is a source fixed by seed.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// Drawer returns a source of market indexes with this popularity.
func (p *popularity) Drawer(r *rand.Rand) func() int32 {
	z := rand.NewZipf(r, p.S, p.V, uint64(len(p.byRank)-1))
	return func() int32 { return p.byRank[z.Uint64()] }
}

// Watchlists draws n lists of size distinct markets each, in draw order
// (the snapshot answers in request order, whatever it is).
func (p *popularity) Watchlists(n, size int, seed uint64) [][]int32 {
	draw := p.Drawer(rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d)))
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

// UpdateSchedule is the publisher's plan and record: update n goes to
// market Market[n] at the version after that market's previous one (the
// world holds version 1, so a market's first update is version 2). Its
// publish time is stored when it is sent and read by the pollers'
// accounting, from any goroutine.
type UpdateSchedule struct {
	start   time.Time
	Market  []int32
	Version []int64
	// Off and byMarket list each market's updates in version order: market
	// m's version v is update byMarket[off[m]+v-2].
	Off      []int32
	byMarket []int32
	// PubAt is each update's publish time in ns since start, plus 1 (0:
	// not published).
	PubAt []atomic.Int64
}

// NewSchedule plans n updates over markets markets, each drawn by draw.
func NewSchedule(start time.Time, markets, n int, draw func() int32) *UpdateSchedule {
	s := &UpdateSchedule{start: start, Market: make([]int32, n), Version: make([]int64, n),
		Off: make([]int32, markets+1), byMarket: make([]int32, n), PubAt: make([]atomic.Int64, n)}
	count := make([]int32, markets)
	for i := range n {
		m := draw()
		s.Market[i] = m
		count[m]++
		s.Version[i] = 1 + int64(count[m])
	}
	for m := range markets {
		s.Off[m+1] = s.Off[m] + count[m]
	}
	for i, m := range s.Market {
		s.byMarket[s.Off[m]+int32(s.Version[i]-2)] = int32(i)
	}
	return s
}

// Published records update n's publish time; call it before publishing.
func (s *UpdateSchedule) Published(n int, at time.Time) {
	s.PubAt[n].Store(int64(at.Sub(s.start)) + 1)
}

// Since is t in the schedule's clock (ns since start).
func (s *UpdateSchedule) Since(t time.Time) int64 { return int64(t.Sub(s.start)) }

// PubTime is when market m's version v was published (ns since start);
// ok is false for a version this schedule never published (yet).
func (s *UpdateSchedule) PubTime(m int32, v int64) (ns int64, ok bool) {
	i := int64(s.Off[m]) + v - 2
	if v < 2 || i >= int64(s.Off[m+1]) {
		return 0, false
	}
	at := s.PubAt[s.byMarket[i]].Load()
	return at - 1, at != 0
}

// Poller is one client: its watchlist, its key, and what it has seen. Only
// the connection that holds it (see pollRun) touches it.
type Poller struct {
	N       int
	Markets []int32
	IDs     []string
	// Path is the snapshot URL of the watchlist, auth its Authorization.
	Path, Auth string
	// Next is the node of its next poll: consecutive polls alternate.
	Next int
	// ETag is the ETag of the last 200 it received, from any node.
	ETag []byte
	// Seen, seenNode and seenAt are, per watched market, the highest
	// version any answer showed it, the node that showed it first and when
	// (ns since the schedule's start).
	Seen     []int64
	SeenNode []int8
	SeenAt   []int64
	// Versions is scratch for the versions of one answer.
	Versions []int64
	// Shown are the versions of the last accounted 200, the one its ETag
	// names: what a 304 to that ETag shows.
	Shown []int64
	// LastSent is the start of its previous request of the run (ns since
	// the schedule's start; 0: none yet).
	LastSent int64
}

// SnapshotPath is the snapshot URL of ids.
func SnapshotPath(ids []string) string {
	return "/public/v1/prices/snapshot?ids=" + strings.Join(ids, ",")
}

// NewPollers makes a poller of each watchlist, naming markets with ids and
// giving poller i the key secrets[i % len(secrets)].
func NewPollers(lists [][]int32, ids func(int32) string, secrets []string) []*Poller {
	out := make([]*Poller, len(lists))
	for i, l := range lists {
		p := &Poller{N: i, Markets: l, IDs: make([]string, len(l)), Next: i % 2, Auth: "Bearer " + secrets[i%len(secrets)],
			Seen: make([]int64, len(l)), SeenNode: make([]int8, len(l)), SeenAt: make([]int64, len(l)), Versions: make([]int64, len(l)),
			Shown: make([]int64, len(l))}
		for j, m := range l {
			p.IDs[j] = ids(m)
		}
		p.Path = SnapshotPath(p.IDs)
		out[i] = p
	}
	return out
}

// AnswerStaleness is how stale an answer's price of market m was when its
// request started (ns): start minus the publish time of the newest version
// published before start that the answer does not show, or 0 when the answer
// shows that version or a newer one (start and the result in ns since the
// schedule's start). The schedule is the per-market history the lookup
// needs: every planned version of each market in version order, with its
// publish time once sent, bounded by the plan.
//
// A market's versions are published in version order, so "published before
// start" holds for a prefix of them and a binary search finds the newest.
func (s *UpdateSchedule) AnswerStaleness(m int32, shown, start int64) int64 {
	shown = max(shown, 1) // the world holds version 1; the schedule starts at 2
	before := func(v int64) (int64, bool) {
		pub, ok := s.PubTime(m, v)
		return pub, ok && pub < start
	}
	// The common case, an answer that is current: the next version was
	// not yet published when the request started.
	if _, ok := before(shown + 1); !ok {
		return 0
	}
	planned := int64(s.Off[m+1] - s.Off[m]) // versions 2 .. planned+1
	// k counts versions after shown+1: the first k for which version
	// Shown+2+k was not published before start.
	k := sort.Search(int(planned+1-(shown+1)), func(k int) bool {
		_, ok := before(shown + 2 + int64(k))
		return !ok
	})
	pub, _ := before(shown + 1 + int64(k))
	return start - pub
}

// Update is the schedule index of market m's version v; ok is false for a
// version the schedule does not plan.
func (s *UpdateSchedule) Update(m int32, v int64) (n int, ok bool) {
	i := int64(s.Off[m]) + v - 2
	if v < 2 || i >= int64(s.Off[m+1]) {
		return 0, false
	}
	return int(s.byMarket[i]), true
}

// Unpublish forgets update n's publish time: it was stamped but the
// publisher stopped before handing it to JetStream.
func (s *UpdateSchedule) Unpublish(n int) { s.PubAt[n].Store(0) }

// Latest is market m's newest published version (1, the world's, when none
// was published).
func (s *UpdateSchedule) Latest(m int32) int64 {
	v := int64(1)
	for {
		if _, ok := s.PubTime(m, v+1); !ok {
			return v
		}
		v++
	}
}
