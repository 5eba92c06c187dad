package stream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
)

// dialAll opens the connections, Dialers at a time; connection i uses the
// key of account i / PerAccount.
func (e *streamEnv) dialAll(ctx context.Context) error {
	e.clients = make([]*streamClient, e.p.Conns)
	var next atomic.Int64
	var once sync.Once
	var first error
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range e.p.Dialers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= e.p.Conns || dctx.Err() != nil {
					return
				}
				c, err := dialStream(dctx, e.load, e.node.Addr, e.secrets[i/e.p.PerAccount], i)
				if err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				e.clients[i] = c
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// subscribeTo raises every connection to s subscriptions and waits for all
// acknowledgements and snapshots.
func (e *streamEnv) subscribeTo(ctx context.Context, s int) error {
	from := e.subs
	var next atomic.Int64
	errs := make(chan error, e.p.Dialers)
	for range e.p.Dialers {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(e.clients) {
					errs <- nil
					return
				}
				if err := e.clients[i].subscribe(e.lists[i][from:s], e.ids); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for range e.p.Dialers {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	e.subs, e.rounds = s, e.rounds+1
	acks, snaps := int64(e.rounds*len(e.clients)), int64(s*len(e.clients))
	deadline := time.Now().Add(streamSubscribeTimeout)
	report := time.Now().Add(5 * time.Second)
	for e.load.acks.Load() < acks || e.load.snapshots.Load() < snaps {
		if err := e.retryRefused(); err != nil {
			return err
		}
		if time.Now().After(report) {
			report = time.Now().Add(5 * time.Second)
			m, _ := e.node.Metrics(ctx) // progress only
			e.log.Info("stream: subscribing", "acks", e.load.acks.Load(), "of", acks, "snapshots", e.load.snapshots.Load(), "of", snaps,
				"node_open", m["marketdata_streams_open"], "node_acks_sent", m[`marketdata_stream_messages_total{type="subscribed"}`],
				"node_prices_sent", m[`marketdata_stream_messages_total{type="price"}`], "refused_unavailable", e.load.refused.Load())
		}
		if err := e.alive(); err != nil {
			return err
		}
		if n := e.load.ended.Load(); n > 0 {
			return fmt.Errorf("%d connections ended while subscribing, first: %s", n, e.load.whyEnded())
		}
		if time.Now().After(deadline) {
			dump := filepath.Join(e.out, "stream-api.goroutines.txt")
			if err := measure.FetchTo(ctx, "http://"+e.node.Admin+"/debug/pprof/goroutine?debug=1", dump); err != nil {
				dump = "not taken: " + err.Error()
			}
			return fmt.Errorf("subscribing to %d markets a connection: %d of %d acks and %d of %d snapshots after %s (node goroutines: %s)",
				s, e.load.acks.Load(), acks, e.load.snapshots.Load(), snaps, streamSubscribeTimeout, dump)
		}
		if err := measure.SleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// retryRefused sends again the subscribes the node refused as unavailable
// (as a client must); a connection is only ever waiting for one.
func (e *streamEnv) retryRefused() error {
	for {
		select {
		case c := <-e.load.retry:
			if err := c.resubscribe(e.ids); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// settle waits, once ingest has applied the last update, until deliveries
// stop, and returns how long that took.
func (e *streamEnv) settle(ctx context.Context) float64 {
	start := time.Now()
	last, quiet := e.load.live.Load(), start
	for time.Since(start) < streamSettleMax && ctx.Err() == nil {
		if measure.SleepCtx(ctx, 100*time.Millisecond) != nil {
			break
		}
		if n := e.load.live.Load(); n != last {
			last, quiet = n, time.Now()
		}
		if time.Since(start) >= streamSettleMin && time.Since(quiet) >= streamQuiet {
			break
		}
	}
	return measure.Round2(time.Since(start).Seconds())
}

// closeClients closes every connection and adds up what they saw: faults,
// and the markets each holds below their newest published version.
func (e *streamEnv) closeClients() StreamFaults {
	var wg sync.WaitGroup
	for _, c := range e.clients {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
	var f StreamFaults
	for _, c := range e.clients {
		if c == nil {
			continue
		}
		f.Add(c.faults)
		f.Repeats += c.repeats
		lost, why := c.behind(e.load.sched, e.ids)
		f.Lost += lost
		for _, msg := range []string{c.first, why} {
			if msg != "" && len(f.First) < measure.MaxRegressionsKept {
				f.First = append(f.First, msg)
			}
		}
	}
	e.clients = nil
	return f
}
