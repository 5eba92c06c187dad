package api

// The node's subscription to the key and change notices, and what they
// update: the key cache, the reader's node memory and the search index.
// The credentials watch (credentials.go) is the safety net under the key
// notices.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/api/search"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
)

// notices keep what the node holds in step with the key and change
// notices: the subscriptions, the connection's handlers they wrapped
// (given back by unsubscribe) and the change subscription's drop count
// last seen.
type notices struct {
	keys *keyCache
	// reader and search follow the change notices (nil: the node has no
	// data routes, and subscribes to the key notices alone).
	reader *cache.Reader
	search *search.Index
	log    *slog.Logger
	// keySubject and changeSubject are Config's KeyNoticeSubject and
	// NoticeSubject.
	keySubject, changeSubject string

	subs           []*nats.Subscription
	dropped        atomic.Int64
	nc             *nats.Conn
	prevReconnect  nats.ConnHandler
	prevDisconnect nats.ConnErrHandler
	prevErr        nats.ErrHandler
}

// newNotices builds the node's notices over what they update; subscribe
// starts them. The search index follows reader's change notices from now
// on.
func newNotices(cfg Config, keys *keyCache, reader *cache.Reader, idx *search.Index, log *slog.Logger) *notices {
	n := &notices{
		keys: keys, reader: reader, search: idx, log: log,
		keySubject: cfg.KeyNoticeSubject, changeSubject: cfg.NoticeSubject,
	}
	if reader != nil {
		// The index follows the same change notices as node memory.
		reader.OnChange(n.followChange)
	}
	return n
}

// onKeyNotice drops what this node cached of the changed account or key, so
// revocation and withdrawal take effect here within the notice's latency.
func (n *notices) onKeyNotice(m *nats.Msg) {
	k, err := notice.DecodeKey(m.Data)
	if err != nil {
		// Unreadable: be safe and drop everything.
		n.keys.flush()
		return
	}
	n.keys.invalidate(k.AccountID, k.KeyID)
}

// onChangeNotice hands a cache change notice to the Reader, which drops
// what node memory holds of it and tells the search index (followChange).
func (n *notices) onChangeNotice(m *nats.Msg) {
	// Messages the client dropped before this one (the subscription fell
	// behind): what they would have dropped is unknown.
	if m.Sub != nil {
		if d, err := m.Sub.Dropped(); err == nil && int64(d) > n.dropped.Load() {
			n.dropped.Store(int64(d))
			n.forgetHeld()
		}
	}
	c, err := notice.DecodeChange(m.Data)
	if err != nil {
		// Unreadable: what it would have dropped is unknown.
		n.forgetHeld()
		return
	}
	n.reader.Notice(c)
}

// followChange keeps the search index on the change notices: it re-reads
// the events a notice names, and reloads in full after a flush (a rebuild,
// or notices that may have been missed).
func (n *notices) followChange(c notice.Change) {
	switch {
	case c.Flush:
		n.search.RequestReload()
	case len(c.Events) > 0:
		n.search.Enqueue(c.Events)
	}
}

// subscribe listens to the key and change notices, and keeps what the node
// holds safe when notices may have been missed: after a reconnect, and when
// a notice subscription falls behind (the client then drops messages and
// says so once, with ErrSlowConsumer; onChangeNotice also watches the
// subscription's drop count). The connection's own handlers, if any, still
// run.
func (n *notices) subscribe(nc *nats.Conn) (err error) {
	defer func() {
		if err != nil {
			n.unsubscribe()
		}
	}()
	keySub, err := nc.Subscribe(n.keySubject, n.onKeyNotice)
	if err != nil {
		return err
	}
	n.subs = append(n.subs, keySub)
	var changeSub *nats.Subscription
	if n.reader != nil {
		if changeSub, err = nc.Subscribe(n.changeSubject, n.onChangeNotice); err != nil {
			return err
		}
		n.subs = append(n.subs, changeSub)
	}
	n.nc = nc
	n.prevReconnect = nc.ReconnectHandler()
	nc.SetReconnectHandler(func(c *nats.Conn) {
		n.keys.flush()
		if n.reader != nil {
			// Notices were missed: node memory is dropped, the search
			// index and the replica load again.
			n.reader.FeedUp()
		}
		if n.prevReconnect != nil {
			n.prevReconnect(c)
		}
	})
	// Cut from the notices, the replica cannot follow: reads go to Redis
	// until the reconnect.
	n.prevDisconnect = nc.DisconnectErrHandler()
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if n.reader != nil {
			n.reader.FeedDown()
		}
		if n.prevDisconnect != nil {
			n.prevDisconnect(c, err)
		}
	})
	n.prevErr = nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		switch {
		case sub != nil && sub == keySub && errors.Is(err, nats.ErrSlowConsumer):
			n.log.Warn("key notices lost (slow consumer): cached keys dropped", "subject", sub.Subject)
			n.keys.flush()
		case sub != nil && sub == changeSub && errors.Is(err, nats.ErrSlowConsumer):
			n.log.Warn("change notices lost (slow consumer): node memory dropped, search reloads", "subject", sub.Subject)
			n.forgetHeld()
		case n.prevErr == nil:
			n.log.Warn("nats error", "err", err)
		}
		if n.prevErr != nil {
			n.prevErr(c, sub, err) // the connection's own logging
		}
	})
	// The subscriptions are live before the node serves: a notice sent
	// from now on reaches it. While NATS reconnects they are re-sent on
	// reconnect, whose handler forgets what the node holds anyway.
	if err := nc.FlushTimeout(5 * time.Second); err != nil && !nc.IsReconnecting() {
		return fmt.Errorf("api: subscribe to notices: %w", err)
	}
	return nil
}

// unsubscribe ends the notice subscriptions and gives the connection its
// own handlers back.
func (n *notices) unsubscribe() {
	for _, sub := range n.subs {
		sub.Unsubscribe() //nolint:errcheck // the connection may be closed
	}
	n.subs = nil
	if n.nc != nil {
		n.nc.SetReconnectHandler(n.prevReconnect)
		n.nc.SetDisconnectErrHandler(n.prevDisconnect)
		n.nc.SetErrorHandler(n.prevErr)
		n.nc = nil
	}
}

// forgetHeld drops what the node holds of the cache (node memory, and the
// search index reloads): change notices may have been missed.
func (n *notices) forgetHeld() {
	if n.reader != nil {
		n.reader.Forget()
	}
}
