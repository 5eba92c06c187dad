package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// Visible reads the version of each market's cached price item, in order, in
// pipelines of at most 500 reads: 0 where there is no price item yet.
func Visible(ctx context.Context, c *cache.Cache, ids []string) ([]int64, error) {
	out := make([]int64, 0, len(ids))
	for i := 0; i < len(ids); i += 500 {
		entries, err := c.Markets(ctx, ids[i:min(i+500, len(ids))])
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			var v struct {
				Version int64 `json:"version"`
			}
			if len(e.Body) > 0 {
				if err := json.Unmarshal(e.Body, &v); err != nil {
					return nil, fmt.Errorf("price item of %s: %w", ids[len(out)], err)
				}
			}
			out = append(out, v.Version)
		}
	}
	return out, nil
}

// Tracker measures freshness: for each published update, the time from its
// publish to the moment the benchmark, woken by a change notice, reads a
// version at least as new from Redis.
type Tracker struct {
	cache *cache.Cache
	ids   []string
	index map[string]int
	round world.Round
	start time.Time
	// pub holds each update's publish time (since start, +1 so 0 = not yet),
	// by update index n.
	pub []atomic.Int64

	mu       sync.Mutex
	next     []int           // per market: its next update not yet seen, as a round
	samples  []time.Duration // freshness of each update seen
	notices  int
	readErrs int
	lastErr  error
	all      chan struct{} // closed when every update was seen
}

// NewTracker tracks the updates of r over markets ids.
func NewTracker(c *cache.Cache, ids []string, r world.Round) *Tracker {
	t := &Tracker{
		cache: c, ids: ids, index: make(map[string]int, len(ids)), round: r, start: time.Now(),
		pub: make([]atomic.Int64, r.N), next: make([]int, len(ids)),
		samples: make([]time.Duration, 0, r.N), all: make(chan struct{}),
	}
	for i, id := range ids {
		t.index[id] = i
	}
	return t
}

// Published records update n's publish time; call it before publishing.
func (t *Tracker) Published(n int, at time.Time) {
	t.pub[n].Store(int64(at.Sub(t.start)) + 1)
}

// Subscribe follows the notice subject with workers reading Redis. The
// subscription callback only queues, so a slow Redis read delays no other
// notice's receipt. The returned stop unsubscribes and waits for the workers.
func (t *Tracker) Subscribe(nc *nats.Conn, subject string, workers int) (stop func(), err error) {
	queue := make(chan []byte, 1<<16)
	var dropped atomic.Int64
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		select {
		case queue <- m.Data:
		default:
			dropped.Add(1) // counted as a read error below; its updates are seen with a later notice or not at all
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe() //nolint:errcheck // the setup error is the one to report
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := nc.Flush(); err != nil {
		sub.Unsubscribe() //nolint:errcheck // the setup error is the one to report
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for data := range queue {
				t.notice(data)
			}
		})
	}
	return func() {
		sub.Unsubscribe() //nolint:errcheck // stopping: the sandbox's connection closes after it anyway
		close(queue)
		wg.Wait()
		if n := dropped.Load(); n > 0 {
			t.mu.Lock()
			t.readErrs += int(n)
			t.lastErr = fmt.Errorf("%d notices dropped: queue full", n)
			t.mu.Unlock()
		}
	}, nil
}

// notice handles one change notice: one Redis pipeline for its markets, then
// a sample for every update of those markets now visible.
func (t *Tracker) notice(data []byte) {
	var n notice.Change
	if err := json.Unmarshal(data, &n); err != nil {
		t.readError(fmt.Errorf("notice: %w", err))
		return
	}
	ids := n.Markets[:0:0]
	for _, id := range n.Markets {
		if _, ok := t.index[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	versions, err := Visible(context.Background(), t.cache, ids)
	now := time.Since(t.start)
	if err != nil {
		t.readError(err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notices++
	for k, id := range ids {
		i := t.index[id]
		for ; t.next[i]*t.round.Markets+i < t.round.N; t.next[i]++ {
			if t.round.Base+int64(t.next[i]) > versions[k] {
				break
			}
			pub := t.pub[t.next[i]*t.round.Markets+i].Load()
			if pub == 0 {
				break // visible before we published it: a version from elsewhere
			}
			t.samples = append(t.samples, now-time.Duration(pub-1))
		}
	}
	if len(t.samples) == t.round.N {
		select {
		case <-t.all:
		default:
			close(t.all)
		}
	}
}

func (t *Tracker) readError(err error) {
	t.mu.Lock()
	t.readErrs++
	t.lastErr = err
	t.mu.Unlock()
}

// All is closed once every update has a sample.
func (t *Tracker) All() <-chan struct{} { return t.all }

// FreshnessStats is the distribution of the samples.
type FreshnessStats struct {
	Count      int     `json:"count"`
	Unmeasured int     `json:"unmeasured"`
	Notices    int     `json:"notices"`
	ReadErrors int     `json:"read_errors"`
	P50MS      float64 `json:"p50_ms"`
	P90MS      float64 `json:"p90_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
	MeanMS     float64 `json:"mean_ms"`
}

// Stats summarises the samples so far (nearest-rank percentiles).
func (t *Tracker) Stats() (FreshnessStats, error) {
	t.mu.Lock()
	s := slices.Clone(t.samples)
	st := FreshnessStats{Count: len(s), Unmeasured: t.round.N - len(s), Notices: t.notices, ReadErrors: t.readErrs}
	lastErr := t.lastErr
	t.mu.Unlock()
	if len(s) == 0 {
		return st, lastErr
	}
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return measure.Round2(float64(d) / float64(time.Millisecond)) }
	rank := func(q float64) time.Duration {
		i := int(float64(len(s))*q+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	st.P50MS, st.P90MS, st.P99MS, st.MaxMS = ms(rank(0.5)), ms(rank(0.9)), ms(rank(0.99)), ms(s[len(s)-1])
	st.MeanMS = ms(sum / time.Duration(len(s)))
	return st, lastErr
}
