package stream

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/notice"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// noticeClock measures fan-out from outside the node. The load tool follows
// the change-notice subject the node follows and stamps each published
// update with the arrival of the first notice naming its market after it was
// published: the node had its notice at about that moment, and from then on
// the delivery is the node's work (its batched Redis read and its fan-out).
type noticeClock struct {
	sched *world.UpdateSchedule
	index map[string]int32

	mu sync.Mutex
	// next is, per market, its oldest version not yet stamped.
	next []int64
	// at is each update's stamp, ns since the schedule's start, plus 1 (0:
	// none yet).
	at []atomic.Int64

	notices, unknown, undecodable atomic.Int64
}

func newNoticeClock(sched *world.UpdateSchedule, index map[string]int32) *noticeClock {
	k := &noticeClock{sched: sched, index: index, next: make([]int64, len(sched.Off)-1),
		at: make([]atomic.Int64, len(sched.Market))}
	for m := range k.next {
		k.next[m] = 2
	}
	return k
}

// observe takes a notice naming markets that arrived at t (ns since the
// schedule's start): every published version of them not yet stamped and
// published by t gets t.
func (k *noticeClock) observe(markets []string, t int64) {
	k.notices.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range markets {
		m, ok := k.index[id]
		if !ok {
			k.unknown.Add(1)
			continue
		}
		for v := k.next[m]; ; v++ {
			n, ok := k.sched.Update(m, v)
			if !ok {
				break
			}
			pub := k.sched.PubAt[n].Load()
			if pub == 0 || pub-1 > t {
				break
			}
			k.at[n].Store(t + 1)
			k.next[m] = v + 1
		}
	}
}

// arrival is update n's stamp.
func (k *noticeClock) arrival(n int) (int64, bool) {
	a := k.at[n].Load()
	return a - 1, a != 0
}

// forget undoes update n's stamp along with its publish time (see
// updateSchedule.unpublish): it will be published again later.
func (k *noticeClock) forget(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sched.Unpublish(n)
	k.at[n].Store(0)
	m, v := k.sched.Market[n], k.sched.Version[n]
	k.next[m] = min(k.next[m], v)
}

// follow subscribes to subject on a connection of its own, so notices never
// queue behind the publisher's acknowledgements. The receipt time is taken
// first thing in the callback.
func (k *noticeClock) follow(url, subject string) (stop func(), err error) {
	nc, err := nats.Connect(url, nats.Name("mdbench notices"), nats.Timeout(3*time.Second))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", url, err)
	}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		t := k.sched.Since(time.Now())
		c, err := notice.DecodeChange(m.Data)
		if err != nil {
			k.undecodable.Add(1)
			return
		}
		k.observe(c.Markets, t)
	})
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	return nc.Close, nil
}

// atomicHist is a durHist many connections add to at once.
type atomicHist struct {
	counts [measure.HistBuckets]atomic.Int64
	n, max atomic.Int64
}

func (h *atomicHist) Add(us int64) {
	h.counts[measure.HistIndex(us)].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// hist copies h, once nothing adds to it any more.
func (h *atomicHist) hist() *measure.DurHist {
	d := &measure.DurHist{N: h.n.Load(), Max: h.max.Load()}
	for i := range h.counts {
		d.Counts[i] = h.counts[i].Load()
	}
	return d
}

// streamPhase collects what the connections receive while it is the load's
// current phase: live deliveries (snapshots on subscribe excluded), their
// end-to-end and fan-out latencies.
type streamPhase struct {
	e2e, fanout atomicHist
	deliveries  atomic.Int64
	// conflated counts versions a client never received because a newer
	// one replaced them (the node's slow-reader conflation).
	conflated atomic.Int64

	mu sync.Mutex
	// pending are deliveries that reached the client before the load tool
	// had the notice of their update: resolved by settle.
	pending []pendingFanout
}

type pendingFanout struct {
	update int
	at     int64
}

// deliver records a delivery of update n at at (ns since the schedule's
// start), published at pub.
func (p *streamPhase) deliver(k *noticeClock, n int, pub, at int64) {
	p.deliveries.Add(1)
	p.e2e.Add(max(at-pub, 0) / 1000)
	if a, ok := k.arrival(n); ok {
		if at >= a {
			p.fanout.Add((at - a) / 1000)
			return
		}
	}
	p.mu.Lock()
	p.pending = append(p.pending, pendingFanout{n, at})
	p.mu.Unlock()
}

// FanoutStats is the fan-out latency of a phase: the load tool's receipt of
// the change notice → the client's receipt of the price.
type FanoutStats struct {
	Count int64   `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// BeforeNotice are deliveries the client had before the load tool had
	// their notice (counted as 0 ms); NoNotice are deliveries whose update
	// no notice followed (not counted).
	BeforeNotice int64 `json:"before_notice"`
	NoNotice     int64 `json:"no_notice"`
}

// LatencyStats is a latency distribution's summary.
type LatencyStats struct {
	Count int64   `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

func latencyOf(h *measure.DurHist) LatencyStats {
	s := LatencyStats{Count: h.N, MaxMS: measure.Round2(float64(h.Max) / 1000)}
	s.P50MS, _ = h.QuantileMS(0.50, 0)
	s.P99MS, _ = h.QuantileMS(0.99, 0)
	return s
}

// settle resolves the pending deliveries with the stamps known now (call it
// once the phase is no longer current and its notices had time to arrive)
// and returns the two distributions.
func (p *streamPhase) settle(k *noticeClock) (e2e LatencyStats, fan FanoutStats) {
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, d := range pending {
		a, ok := k.arrival(d.update)
		switch {
		case !ok:
			fan.NoNotice++
		case d.at < a:
			fan.BeforeNotice++
			p.fanout.Add(0)
		default:
			p.fanout.Add((d.at - a) / 1000)
		}
	}
	l := latencyOf(p.fanout.hist())
	fan.Count, fan.P50MS, fan.P99MS, fan.MaxMS = l.Count, l.P50MS, l.P99MS, l.MaxMS
	return latencyOf(p.e2e.hist()), fan
}
