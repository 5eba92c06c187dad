package ratelimit

import (
	"sync"
	"time"
)

// local is the per-node fallback used while Redis does not answer. Its
// windows are aligned like the Redis ones, on the node's clock, and an
// account's limit is divided by the number of live API nodes: together the
// nodes accept about one limit per window, never N of them.
type local struct {
	mu      sync.Mutex
	peers   func() int
	now     func() time.Time
	windows map[string]*window
	sweep   time.Time
}

type window struct {
	start time.Time
	end   time.Time
	n     int
}

func newLocal(peers func() int, now func() time.Time) *local {
	if peers == nil {
		peers = func() int { return 1 }
	}
	if now == nil {
		now = time.Now
	}
	return &local{peers: peers, now: now, windows: map[string]*window{}}
}

// share is this node's part of a limit: at least 1.
func (l *local) share(limit int) int {
	n := max(l.peers(), 1)
	return max((limit+n-1)/n, 1)
}

func (l *local) get(key string, now time.Time, w time.Duration, aligned bool) *window {
	l.gc(now)
	win := l.windows[key]
	if win == nil || !now.Before(win.end) {
		start := now
		if aligned {
			// On multiples of w since the Unix epoch, as in Redis: Truncate
			// counts from year 1 and would disagree for windows like 7s.
			start = now.Add(-time.Duration(now.UnixNano() % int64(w)))
		}
		win = &window{start: start, end: start.Add(w)}
		l.windows[key] = win
	}
	return win
}

// gc drops expired windows once a minute, so the map stays small.
func (l *local) gc(now time.Time) {
	if now.Before(l.sweep) {
		return
	}
	l.sweep = now.Add(time.Minute)
	for k, w := range l.windows {
		if !now.Before(w.end) {
			delete(l.windows, k)
		}
	}
}

func (l *local) allow(key string, limit int, w time.Duration) Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	win := l.get(key, now, w, true)
	share := l.share(limit)
	r := Result{Limit: limit, ResetAfter: win.end.Sub(now), Degraded: true}
	if win.n < share {
		win.n++
		r.Allowed = true
	} else {
		r.RetryAfter = r.ResetAfter
	}
	// Remaining is reported against the whole limit, scaled from this
	// node's share, so clients see the same scale as in normal operation.
	r.Remaining = max(limit-win.n*max(l.peers(), 1), 0)
	return r
}

func (l *local) blocked(key string, limit int) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	win := l.windows[key]
	if win == nil || !now.Before(win.end) || win.n < l.share(limit) {
		return false, 0
	}
	return true, win.end.Sub(now)
}

func (l *local) fail(key string, limit int, w time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	win := l.get(key, l.now(), w, false)
	win.n++
}
