package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/store"
)

// The Reader's side of the price replica (replica.go): loading it, keeping
// it whole, and knowing when it may answer.

// wakeReplica asks the loader for a load (it coalesces requests).
func (r *Reader) wakeReplica() {
	select {
	case r.repWake <- struct{}{}:
	default:
	}
}

// replicaLoop loads the replica whenever it is not whole, retrying until a
// load succeeds, while the node follows the notices (FeedUp).
func (r *Reader) replicaLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stop
		cancel()
	}()
	for {
		select {
		case <-r.stop:
			return
		case <-r.repWake:
		}
		for !r.rep.ready.Load() && !r.feedDown.Load() {
			if err := r.loadReplica(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				// A flush or a gap during the load (a cache rebuild at a
				// clean start sends one) only makes it start over: no
				// warning for that.
				level := slog.LevelWarn
				if err == errReplicaMoved {
					level = slog.LevelInfo
				}
				r.repairWarn.Log(ctx, r.log, level, "price replica not loaded: reads go to Redis meanwhile", "err", err)
				select {
				case <-r.stop:
					return
				case <-time.After(replicaRetry):
				}
			}
		}
	}
}

// errReplicaMoved: notices were missed while a load ran; it starts over.
var errReplicaMoved = errors.New("notices were missed during the load")

// loadReplica makes the replica whole: it reads Redis's change number n0,
// then every price item, and becomes ready once the notices of every number
// up to n0 have been applied. Why that makes it whole: a write whose number
// is above n0 sends its notice after the load began, which the replica
// applies whenever it comes (by revision); a write numbered at most n0 either
// reached Redis before the scan read its key (the scan has it) or sends its
// notice after the scan, and the replica waits for that notice. A number
// given up as lost meanwhile invalidates the replica, and the load starts
// over.
func (r *Reader) loadReplica(ctx context.Context) error {
	// At the node's start the change numbers are first learned with a
	// wait (appliedSeqs): loading before it ends would be thrown away.
	if err := r.settle(ctx); err != nil {
		return err
	}
	epoch := r.rep.begin()
	began := time.Now()
	n0, err := r.cache.Seq(ctx)
	if err != nil {
		return err
	}
	// Merged by revision into what the replica holds (no copy of the whole
	// map at once): only a flush (a rebuild may have pruned keys) clears it
	// first (Notice).
	n, err := r.cache.loadReplica(ctx, r.rep)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*r.cfg.NoticeWait)
	defer cancel()
	if !r.seqs.await(wctx, n0, 2*r.cfg.NoticeWait) {
		return fmt.Errorf("cache: replica: the notices up to change %d did not arrive: %w", n0, errReplicaMoved)
	}
	if !r.rep.finish(epoch) {
		return errReplicaMoved
	}
	r.replicaLoads.Inc()
	r.log.Info("price replica loaded", "items", n, "bytes", r.rep.bytes.Load(), "took", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// settle waits, at most twice the notice wait, until the change numbers are
// past the node's first gap (the start's jump) or Redis has none.
func (r *Reader) settle(ctx context.Context) error {
	deadline := time.Now().Add(2 * r.cfg.NoticeWait)
	for time.Now().Before(deadline) {
		r.seqs.mu.Lock()
		started := r.seqs.applied > 0 || r.seqs.highest == 0 && r.lastRedis.Load() != 0
		r.seqs.mu.Unlock()
		if started {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// refreshReplica reads again, in the background, the price items a notice
// named without carrying them (the replica removed them: reads of them go
// to Redis meanwhile). A failure invalidates the replica, which loads again.
func (r *Reader) refreshReplica(ids []string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ms, err := r.cache.Markets(ctx, ids)
		if err != nil {
			r.rep.invalidate()
			r.wakeReplica()
			return
		}
		for i, m := range ms {
			if m.Found {
				r.rep.put(ids[i], replicaItem{rev: m.Rev, seq: m.Seq, served: m.Served, body: m.Body})
			}
		}
	}()
}

// pollLoop reads Redis's change number every PollEvery: a number whose
// notice does not come within NoticeWait is given up as lost (and the
// replica loads again) even when no request asks, and a Redis that stops
// answering for TTL/2 takes the replica out of service, so that reads fall
// back as they would without it (the contract's 2 s bound holds: writes
// Postgres took meanwhile are served from it).
func (r *Reader) pollLoop() {
	t := time.NewTicker(r.cfg.PollEvery)
	defer t.Stop()
	for {
		v := r.roundTrip(context.Background(), nil)
		now := time.Now()
		if r.rep != nil && r.rep.overdue(now) {
			r.lostWarn.Log(context.Background(), r.log, slog.LevelWarn,
				"change notices did not come within the notice wait and a second more: the price replica reloads")
			r.rep.invalidate()
			r.wakeReplica()
		}
		if v.redisErr == nil {
			r.lastRedis.Store(now.UnixNano())
			if r.rep != nil && !r.rep.ready.Load() {
				r.wakeReplica()
			}
		} else if r.rep != nil && r.rep.ready.Load() && now.Sub(time.Unix(0, r.lastRedis.Load())) > r.cfg.TTL/2 {
			r.log.Warn("redis does not answer: the price replica stops answering until it loads again", "err", v.redisErr)
			r.rep.invalidate()
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

// replicaLate is how long a change number given up as lost may still have
// its notice come before the replica reloads (1s): with the 500 ms notice
// wait, a notice truly lost makes reads go to Redis within 1.5 s (the
// contract's 2 s), while one held up by an overloaded Redis costs no
// reload — a reload scans every price item, which would only load Redis
// more.
const replicaLate = time.Second

// replicaLost takes the numbers a timed-out gap gave up (appliedSeqs; its
// lock is held): the replica waits replicaLate for their notices, nil
// (too many to list) reloads it at once.
func (r *Reader) replicaLost(missing []int64) {
	if missing == nil {
		r.rep.invalidate()
		r.wakeReplica()
		return
	}
	r.rep.expectLate(missing, time.Now().Add(replicaLate))
}

// FeedDown says the node no longer receives change notices (NATS
// disconnected): the replica stops answering, and node memory is dropped.
func (r *Reader) FeedDown() {
	r.feedDown.Store(true)
	r.forgetAll()
}

// FeedUp says the notices flow again (NATS reconnected, subscriptions
// renewed): node memory is dropped (notices were missed) and the replica
// loads again.
func (r *Reader) FeedUp() {
	r.feedDown.Store(false)
	r.Forget()
}

// ReplicaReady reports whether the price replica answers (for /readyz's
// detail and tests).
func (r *Reader) ReplicaReady() bool { return r.rep != nil && r.rep.ready.Load() }

// replicaFor returns the replica when a read may be answered from it: it is
// whole, and every notice up to pos (the position the client last saw: its
// ETag; 0 when none) has been applied, waiting up to OrderWait for that.
func (r *Reader) replicaFor(ctx context.Context, pos int64) *replica {
	if r.rep == nil || !r.rep.ready.Load() {
		return nil
	}
	if pos > 0 && !r.seqs.await(ctx, pos, r.cfg.OrderWait) {
		r.orderWaits.Inc()
		return nil
	}
	if lo := r.rep.lateMin.Load(); pos > 0 && lo > 0 && pos >= lo {
		// The client may have seen a write whose notice is late here.
		r.orderWaits.Inc()
		return nil
	}
	return r.rep
}

// errFallbackBusy: every store fallback slot is taken.
var errFallbackBusy = errors.New("cache: too many reads are falling back to the store")

// boundedStore is the store as the Reader falls back to it: at most
// Fallbacks reads at once, the others refused at once (ErrUnavailable to
// the caller) rather than queued behind them.
type boundedStore struct {
	st    Store
	slots chan struct{}
}

func (b *boundedStore) take() (func(), error) {
	select {
	case b.slots <- struct{}{}:
		return func() { <-b.slots }, nil
	default:
		return nil, errFallbackBusy
	}
}

func (b *boundedStore) EventDocsByID(ctx context.Context, ids []string) ([]store.EventDoc, error) {
	done, err := b.take()
	if err != nil {
		return nil, err
	}
	defer done()
	return b.st.EventDocsByID(ctx, ids)
}

func (b *boundedStore) MarketDocsByID(ctx context.Context, ids []string) ([]store.MarketDoc, error) {
	done, err := b.take()
	if err != nil {
		return nil, err
	}
	defer done()
	return b.st.MarketDocsByID(ctx, ids)
}

func (b *boundedStore) NewestTrades(ctx context.Context, marketID string, limit int) ([]store.Trade, error) {
	done, err := b.take()
	if err != nil {
		return nil, err
	}
	defer done()
	return b.st.NewestTrades(ctx, marketID, limit)
}

func (b *boundedStore) ListedEvents(ctx context.Context, f store.ListFilter, after string, limit int) ([]store.Event, error) {
	done, err := b.take()
	if err != nil {
		return nil, err
	}
	defer done()
	return b.st.ListedEvents(ctx, f, after, limit)
}
