package ingest

import (
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

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
