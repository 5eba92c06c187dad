// Package ingest consumes matcher updates from NATS JetStream: validate, write
// a batch to Postgres (versioned), write its snapshots to Redis, then
// acknowledge and publish a change notice.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// Store is what the worker needs of the source of truth.
type Store interface {
	ApplyBatch(ctx context.Context, b *store.Batch) (*store.Result, error)
	InsertRejects(ctx context.Context, rejects []store.Reject) error
	EventsResolvedBetween(ctx context.Context, from, to time.Time) ([]string, error)
	SweepCursor(ctx context.Context) (time.Time, bool, error)
	SetSweepCursor(ctx context.Context, at time.Time) error
}

// Cache is what the worker needs of the snapshots. Apply returns the
// change number the write took, which the change notice names.
type Cache interface {
	Apply(ctx context.Context, res *store.Result) (int64, error)
}

var (
	_ Store = (*store.Store)(nil)
	_ Cache = (*cache.Cache)(nil)
)

// Worker is one ingest process's consumer loop.
type Worker struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	store   Store
	cache   Cache
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
	// retention is how long a resolved market stays served (for the sweeper).
	retention time.Duration
}

// Deps are the worker's collaborators.
type Deps struct {
	NC        *nats.Conn
	Store     Store
	Cache     Cache
	Metrics   *Metrics
	Log       *slog.Logger
	Now       func() time.Time
	Retention time.Duration
}

// New returns a worker; call Run to consume.
func New(cfg Config, d Deps) (*Worker, error) {
	js, err := jetstream.New(d.NC)
	if err != nil {
		return nil, fmt.Errorf("ingest: jetstream: %w", err)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Worker{
		cfg: cfg.Defaults(), nc: d.NC, js: js, store: d.Store, cache: d.Cache,
		metrics: d.Metrics, log: d.Log, now: d.Now, retention: d.Retention,
	}, nil
}

// inflight is one delivered message with what was made of it.
type inflight struct {
	msg     jetstream.Msg
	meta    *jetstream.MsgMetadata
	update  *Update
	reject  *store.Reject
	version int64
}

// Run consumes until ctx is done. The batch in hand when ctx ends is finished
// (written and acknowledged) before Run returns.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.setup(ctx)
	if err != nil {
		return err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(2 * w.cfg.BatchSize))
	if err != nil {
		return fmt.Errorf("ingest: pull from %s: %w", w.cfg.Consumer, err)
	}
	defer iter.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the watchers end with Run

	go w.watchLag(ctx, cons)
	go w.watchStreams(ctx)
	go w.sweep(ctx)

	w.log.Info("ingest consuming", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer,
		"batch_size", w.cfg.BatchSize, "appliers", w.cfg.Appliers, "linger", w.cfg.Linger.String())
	// One collector fills batches; several appliers write them, so a batch is
	// collected and decoded while others wait on Postgres or Redis. Appliers
	// may write updates of the same documents at once: the store's document
	// locks and revisions make that safe, exactly as for separate processes.
	// While every applier is busy, messages gather in the client's buffer and
	// the next batch is larger.
	batches := make(chan batch)
	var wg sync.WaitGroup
	for range w.cfg.Appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				// A batch is finished even when shutdown begins meanwhile.
				w.process(context.WithoutCancel(ctx), b.msgs, b.started)
			}
		}()
	}
	err = w.collect(ctx, iter, batches)
	close(batches)
	wg.Wait()
	return err
}

// batch is what the collector hands an applier.
type batch struct {
	msgs    []jetstream.Msg
	started time.Time
}

// collect reads batches until ctx is done. A batch takes what arrives within
// Linger of its first message, up to BatchSize: small batches when traffic
// is light (freshness), full ones when a backlog waits (throughput).
func (w *Worker) collect(ctx context.Context, iter jetstream.MessagesContext, out chan<- batch) error {
	for {
		first, err := iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				w.handBack(iter)
				return nil
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("ingest: message iterator closed: %w", err)
			}
			w.log.Warn("ingest pull", "err", err)
			continue
		}
		b := batch{msgs: []jetstream.Msg{first}, started: time.Now()}
		deadline := b.started.Add(w.cfg.Linger)
		for len(b.msgs) < w.cfg.BatchSize {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			m, err := iter.Next(jetstream.NextMaxWait(wait))
			if err != nil {
				break
			}
			b.msgs = append(b.msgs, m)
		}
		select {
		case out <- b:
		case <-ctx.Done():
			for _, m := range b.msgs {
				m.Nak() //nolint:errcheck // redelivered after AckWait anyway
			}
			w.handBack(iter)
			return nil
		}
	}
}

// handBack stops pulling and gives the messages already buffered in this
// client back to the stream at once, so other workers take them without
// waiting for their ack deadline.
func (w *Worker) handBack(iter jetstream.MessagesContext) {
	iter.Drain()
	for {
		m, err := iter.Next(jetstream.NextMaxWait(100 * time.Millisecond))
		if err != nil {
			return
		}
		m.Nak() //nolint:errcheck // redelivered after AckWait anyway
	}
}

// process handles one batch: nothing is acknowledged before it is committed
// to Postgres and written to Redis; a failure hands the messages back.
func (w *Worker) process(ctx context.Context, msgs []jetstream.Msg, started time.Time) {
	// A batch must finish well before its messages' ack deadline; a hung
	// connection or a lock held elsewhere must not hold an applier forever.
	ctx, cancel := context.WithTimeout(ctx, min(w.cfg.AckWait/2, 30*time.Second))
	defer cancel()
	items := make([]*inflight, len(msgs))
	for i, m := range msgs {
		items[i] = w.decode(m)
	}
	defer func() {
		w.metrics.Batches.Inc()
		w.metrics.BatchSize.Observe(float64(len(items)))
		w.metrics.BatchTime.Observe(time.Since(started).Seconds())
	}()
	err := w.apply(ctx, items)
	if err == nil {
		return
	}
	if !permanent(err) {
		// A dependency is down or slow: every message would fail alike.
		// Hand the batch back and pause this applier before it pulls again.
		delay := backoff(items[0].meta.NumDelivered)
		w.log.Error("ingest batch failed; handed back for redelivery", "messages", len(items), "retry_in", delay.String(), "err", err)
		for _, it := range items {
			_ = it.msg.NakWithDelay(delay)
		}
		time.Sleep(min(delay, time.Second))
		return
	}
	// Postgres refused something in the batch: find it by applying each
	// message alone, so that the others go through.
	w.log.Error("ingest batch refused; applying its messages one by one", "messages", len(items), "err", err)
	for _, it := range items {
		err := w.apply(ctx, []*inflight{it})
		if err == nil {
			continue
		}
		if permanent(err) && w.cfg.MaxDeliveries > 0 && it.meta.NumDelivered >= uint64(w.cfg.MaxDeliveries) {
			// Out of deliveries: record it as a reject, never applied.
			kind, _, _ := ParseSubject(w.cfg.SubjectPrefix, it.msg.Subject())
			it.update, it.reject = nil, &store.Reject{
				Subject: it.msg.Subject(), Kind: kind, Payload: it.msg.Data(),
				Reason: fmt.Sprintf("%s: delivered %d times and refused each time: %v",
					ReasonMaxDeliveries, it.meta.NumDelivered, err),
				StreamSeq: it.meta.Sequence.Stream, ReceivedAt: w.now(),
			}
			if err = w.apply(ctx, []*inflight{it}); err == nil {
				continue
			}
		}
		w.log.Error("ingest message failed; handed back for redelivery",
			"subject", it.msg.Subject(), "stream_seq", it.meta.Sequence.Stream,
			"delivered", it.meta.NumDelivered, "err", err)
		_ = it.msg.NakWithDelay(backoff(it.meta.NumDelivered))
	}
}

// permanent reports whether Postgres refused the data itself (a data
// exception, a constraint, a limit), as opposed to a dependency that is down,
// slow or busy, which a later attempt may pass.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "42", "54":
		return true
	}
	return false
}

func backoff(delivered uint64) time.Duration {
	d := time.Duration(1<<min(delivered, 6)) * 100 * time.Millisecond
	return min(d, 10*time.Second)
}

func (w *Worker) decode(m jetstream.Msg) *inflight {
	it := &inflight{msg: m}
	meta, err := m.Metadata()
	if err != nil {
		meta = &jetstream.MsgMetadata{Timestamp: w.now()}
	}
	it.meta = meta
	reject := func(kind, reason string) {
		it.reject = &store.Reject{
			Subject: m.Subject(), Kind: kind, Reason: reason, Payload: m.Data(),
			StreamSeq: meta.Sequence.Stream, ReceivedAt: w.now(),
		}
	}
	u, err := Decode(w.cfg.SubjectPrefix, m.Subject(), m.Data())
	if err != nil {
		reject(u.Kind, err.Error())
		return it
	}
	it.update = u
	switch u.Kind {
	case KindEvent:
		it.version = u.Event.Version
	case KindMarket:
		it.version = u.Market.Version
	case KindPrice:
		it.version = u.Price.Version
	}
	return it
}

// apply writes the valid items as one batch, records the invalid ones, writes
// the cache, acknowledges everything and publishes the change notice.
func (w *Worker) apply(ctx context.Context, items []*inflight) error {
	var b store.Batch
	var rejects []store.Reject
	for _, it := range items {
		switch {
		case it.reject != nil:
			rejects = append(rejects, *it.reject)
		case it.update.Event != nil:
			b.Events = append(b.Events, *it.update.Event)
		case it.update.Market != nil:
			b.Markets = append(b.Markets, *it.update.Market)
		case it.update.Price != nil:
			b.Prices = append(b.Prices, *it.update.Price)
		case it.update.Trade != nil:
			b.Trades = append(b.Trades, *it.update.Trade)
		}
	}
	var res *store.Result
	var seq int64
	if b.Len() > 0 {
		var err error
		if res, err = w.store.ApplyBatch(ctx, &b); err != nil {
			w.metrics.Failures.WithLabelValues("postgres").Inc()
			return err
		}
		if seq, err = w.cache.Apply(ctx, res); err != nil {
			w.metrics.Failures.WithLabelValues("redis").Inc()
			return err
		}
	}
	if len(rejects) > 0 {
		if err := w.store.InsertRejects(ctx, rejects); err != nil {
			w.metrics.Failures.WithLabelValues("rejects").Inc()
			return err
		}
		for _, r := range rejects {
			w.publishReject(ctx, r)
		}
	}
	visible := w.now()
	winners := winningVersions(&b)
	for _, it := range items {
		_ = it.msg.Ack() // a lost ack means a redelivery, which is harmless
		kind, outcome := "unknown", OutcomeRejected
		if it.update != nil {
			kind, outcome = it.update.Kind, OutcomeIgnored
			key := it.update.Kind + ":" + it.update.Key()
			if res.Applied[key] && winners[key] == it.version {
				outcome = OutcomeApplied
				delete(res.Applied, key) // a duplicate in the same batch counts once
			}
			w.metrics.Freshness.Observe(visible.Sub(it.meta.Timestamp).Seconds())
		} else if it.reject != nil {
			kind = it.reject.Kind
		}
		w.metrics.Messages.WithLabelValues(kind, outcome).Inc()
	}
	if res != nil {
		w.notify(res, seq)
	}
	return nil
}

// winningVersions maps each key to the version that Dedup kept.
func winningVersions(b *store.Batch) map[string]int64 {
	out := make(map[string]int64, b.Len())
	for _, e := range b.Events {
		out[KindEvent+":"+e.ID] = e.Version
	}
	for _, m := range b.Markets {
		out[KindMarket+":"+m.ID] = m.Version
	}
	for _, p := range b.Prices {
		out[KindPrice+":"+p.MarketID] = p.Version
	}
	for _, t := range b.Trades {
		out[KindTrade+":"+t.TradeID] = 0
	}
	return out
}

// PublishFlush tells the readers of subject that the cache was rebuilt.
func PublishFlush(nc *nats.Conn, subject string) error {
	return notice.Publish(nc, subject, notice.Change{Flush: true}.Encode())
}

func (w *Worker) notify(res *store.Result, seq int64) {
	n := notice.Change{Seq: seq}
	for _, d := range res.Events {
		n.Events = append(n.Events, d.ID)
	}
	for _, d := range res.Markets {
		n.Markets = append(n.Markets, d.ID)
	}
	for _, t := range res.Trades {
		n.Trades = append(n.Trades, t.MarketID)
	}
	slices.Sort(n.Trades)
	n.Trades = slices.Compact(n.Trades)
	if err := w.nc.Publish(w.cfg.NoticeSubject, n.Encode()); err != nil {
		w.log.Warn("ingest change notice not published", "err", err)
	}
}

// watchLag samples the consumer's backlog every few seconds.
func (w *Worker) watchLag(ctx context.Context, cons jetstream.Consumer) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		info, err := cons.Info(ctx)
		if err == nil {
			w.metrics.Pending.Set(float64(info.NumPending + uint64(info.NumAckPending)))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep refreshes events whose resolved markets age out of retention, so that
// they leave the event read and the served set on time. How far it has come
// is kept in Postgres, so a restart (or a long outage) resumes where it was.
func (w *Worker) sweep(ctx context.Context) {
	if w.retention <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.SweepEvery)
	defer t.Stop()
	for {
		if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("ingest retention sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepOverlap re-examines a little of the last sweep's window, so clocks
// that disagree slightly between workers lose nothing.
const sweepOverlap = 5 * time.Minute

// Sweep refreshes every event with a market whose retention ended since the
// last sweep (since ever, on the first), then records the new cut.
func (w *Worker) Sweep(ctx context.Context) error {
	cut := w.now().Add(-w.retention)
	from, ok, err := w.store.SweepCursor(ctx)
	if err != nil {
		return err
	}
	if ok {
		from = from.Add(-sweepOverlap)
	} else {
		from = time.Unix(0, 0)
	}
	ids, err := w.store.EventsResolvedBetween(ctx, from, cut)
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		res, err := w.store.ApplyBatch(ctx, &store.Batch{Touch: chunk})
		if err != nil {
			return err
		}
		seq, err := w.cache.Apply(ctx, res)
		if err != nil {
			return err
		}
		w.notify(res, seq)
	}
	return w.store.SetSweepCursor(ctx, cut)
}
