package ingest

import (
	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/notice"
)

// PublishFlush tells the readers of subject that the cache was rebuilt.
func PublishFlush(nc *nats.Conn, subject string) error {
	return notice.Publish(nc, subject, notice.Change{Flush: true}.Encode())
}

// notify publishes the change notice of a cache write (cache.Apply made it:
// the ids it rewrote, their price items, the markets with trades).
func (w *Worker) notify(n notice.Change) {
	if err := w.nc.Publish(w.cfg.NoticeSubject, n.EncodeWithin(w.nc.MaxPayload())); err != nil {
		w.log.Warn("ingest change notice not published", "err", err)
	}
}
