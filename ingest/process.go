package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/store"
)

// batchTimeout bounds one batch's work: a hung connection or a lock held
// elsewhere must not hold an applier forever. It is not tied to the ack
// wait (the keeper holds the messages however long the batch takes) and is
// long: a Postgres that is only slow, under load or a checkpoint, still
// finishes a full batch in seconds, and a batch cut short comes back as the
// same work plus a retry, which only makes a slow dependency slower.
const batchTimeout = 15 * time.Second

// process handles one batch: nothing is acknowledged before it is committed
// to Postgres and written to Redis; a failure hands the messages back.
func (w *Worker) process(ctx context.Context, msgs []jetstream.Msg, started time.Time) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	// Every message is acknowledged or handed back by the end.
	defer w.keep.release(msgs)
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
