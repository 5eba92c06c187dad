// Package usage counts an API node's requests per account, UTC day and
// route (contract §3 "Usage"; docs/api.md "Usage"). Every request that
// passed the account's window is counted in the node's memory; a flush adds
// the counts to Postgres every interval (500 ms) in one batch, so no request
// pays a write, a Redis flush loses nothing, and a node killed outright
// loses at most the counts of its last interval.
package usage

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Route is a route of the contract that usage is counted under.
type Route uint8

// The contract's routes, in the order of routeNames.
const (
	RouteKey Route = iota
	RouteEvents
	RouteEvent
	RouteSearch
	RouteSnapshot
	RouteTrades
	RouteAccountKeys
	RouteAccountUsage
	RouteStream
	RouteCandles
)

// routeNames are the routes' names as the counts and the listing carry
// them, by Route.
var routeNames = [...]string{
	"key", "events", "event", "search", "snapshot", "trades", "account_keys", "account_usage", "stream", "candles",
}

// String is the route's name in the contract.
func (r Route) String() string { return routeNames[r] }

// ParseRoute is the route a contract name stands for; ok is false for any
// other name.
func ParseRoute(name string) (r Route, ok bool) {
	for i, n := range routeNames {
		if n == name {
			return Route(i), true
		}
	}
	return 0, false
}

// Day is the midnight (UTC) starting the UTC day t falls on.
func Day(t time.Time) time.Time { return dayTime(utcDay(t)) }

// utcDay is the number of the UTC day t falls on (days since 1970-01-01).
func utcDay(t time.Time) int32 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return int32(d)
}

// dayTime is the midnight (UTC) starting day d.
func dayTime(d int32) time.Time {
	return time.Unix(int64(d)*86400, 0).UTC()
}

// key is what a count is kept by; day is days since 1970-01-01 UTC.
type key struct {
	account string
	day     int32
	route   Route
}

// shards spreads the counting over locks: a request picks a shard at
// random (math/rand/v2's per-thread generator, no shared state), so even
// one busy account on one route does not make every core wait on one
// lock. The flush adds the shards up.
const shards = 16

type shard struct {
	mu sync.Mutex
	m  map[key]int64
	_  [40]byte // a cache line of its own
}

// tally holds the counts not yet taken by a flush.
type tally struct {
	shards [shards]shard
}

func newTally() *tally {
	u := &tally{}
	for i := range u.shards {
		u.shards[i].m = make(map[key]int64)
	}
	return u
}

// add counts one request: a map lookup and an add under an uncontended lock.
func (u *tally) add(account string, day int32, route Route) {
	sh := &u.shards[rand.Uint32()%shards]
	k := key{account: account, day: day, route: route}
	sh.mu.Lock()
	sh.m[k]++
	sh.mu.Unlock()
}

// take removes and returns every count, merged across shards.
func (u *tally) take() map[key]int64 {
	var out map[key]int64
	for i := range u.shards {
		sh := &u.shards[i]
		sh.mu.Lock()
		m := sh.m
		if len(m) > 0 {
			sh.m = make(map[key]int64, len(m))
		}
		sh.mu.Unlock()
		if len(m) == 0 {
			continue
		}
		if out == nil {
			out = m
			continue
		}
		for k, n := range m {
			out[k] += n
		}
	}
	return out
}
