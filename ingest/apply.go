package ingest

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

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
	if b.Len() > 0 {
		var err error
		if res, err = w.store.ApplyBatch(ctx, &b); err != nil {
			w.metrics.Failures.WithLabelValues("postgres").Inc()
			return err
		}
		var n notice.Change
		n, err = w.cache.Apply(ctx, res)
		// The notice goes out at once, before the rejects and acks: nodes
		// wait for it (a node that saw the change number serves memory only
		// once the notice is applied). A write that failed after taking its
		// number may have landed in part: its notice drops what it names
		// all the same, and closes the number's gap.
		if n.Seq > 0 {
			w.notify(n)
		}
		if err != nil {
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
