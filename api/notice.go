package api

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/notice"
)

// onKeyNotice drops what this node cached of the changed account or key, so
// revocation and withdrawal take effect here within the notice's latency.
func (s *Server) onKeyNotice(m *nats.Msg) {
	n, err := notice.DecodeKey(m.Data)
	if err != nil {
		// Unreadable: be safe and drop everything.
		s.keys.flush()
		return
	}
	s.keys.invalidate(n.AccountID, n.KeyID)
}

// onChangeNotice hands a cache change notice to the Reader, which drops
// what node memory holds of it and tells the search index (followChange).
func (s *Server) onChangeNotice(m *nats.Msg) {
	// Messages the client dropped before this one (the subscription fell
	// behind): what they would have dropped is unknown.
	if m.Sub != nil {
		if d, err := m.Sub.Dropped(); err == nil && int64(d) > s.notices.dropped.Load() {
			s.notices.dropped.Store(int64(d))
			s.forgetHeld()
		}
	}
	n, err := notice.DecodeChange(m.Data)
	if err != nil {
		// Unreadable: what it would have dropped is unknown.
		s.forgetHeld()
		return
	}
	s.reader.Notice(n)
}

// followChange keeps the search index on the change notices: it re-reads
// the events a notice names, and reloads in full after a flush (a rebuild,
// or notices that may have been missed).
func (s *Server) followChange(n notice.Change) {
	switch {
	case n.Flush:
		s.search.RequestReload()
	case len(n.Events) > 0:
		s.search.Enqueue(n.Events)
	}
}

// subscribe listens to the key and change notices, and keeps what the node
// holds safe when notices may have been missed: after a reconnect, and when
// a notice subscription falls behind (the client then drops messages and
// says so once, with ErrSlowConsumer; onChangeNotice also watches the
// subscription's drop count). The connection's own handlers, if any, still
// run.
func (s *Server) subscribe(nc *nats.Conn) (err error) {
	defer func() {
		if err != nil {
			s.unsubscribe()
		}
	}()
	keySub, err := nc.Subscribe(s.cfg.KeyNoticeSubject, s.onKeyNotice)
	if err != nil {
		return err
	}
	s.notices.subs = append(s.notices.subs, keySub)
	var changeSub *nats.Subscription
	if s.reader != nil {
		if changeSub, err = nc.Subscribe(s.cfg.NoticeSubject, s.onChangeNotice); err != nil {
			return err
		}
		s.notices.subs = append(s.notices.subs, changeSub)
	}
	s.notices.nc = nc
	s.notices.prevReconnect = nc.ReconnectHandler()
	nc.SetReconnectHandler(func(c *nats.Conn) {
		s.keys.flush()
		if s.reader != nil {
			// Notices were missed: node memory is dropped, the search
			// index and the replica load again.
			s.reader.FeedUp()
		}
		if s.notices.prevReconnect != nil {
			s.notices.prevReconnect(c)
		}
	})
	// Cut from the notices, the replica cannot follow: reads go to Redis
	// until the reconnect.
	s.notices.prevDisconnect = nc.DisconnectErrHandler()
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if s.reader != nil {
			s.reader.FeedDown()
		}
		if s.notices.prevDisconnect != nil {
			s.notices.prevDisconnect(c, err)
		}
	})
	s.notices.prevErr = nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		switch {
		case sub != nil && sub == keySub && errors.Is(err, nats.ErrSlowConsumer):
			s.log.Warn("key notices lost (slow consumer): cached keys dropped", "subject", sub.Subject)
			s.keys.flush()
		case sub != nil && sub == changeSub && errors.Is(err, nats.ErrSlowConsumer):
			s.log.Warn("change notices lost (slow consumer): node memory dropped, search reloads", "subject", sub.Subject)
			s.forgetHeld()
		case s.notices.prevErr == nil:
			s.log.Warn("nats error", "err", err)
		}
		if s.notices.prevErr != nil {
			s.notices.prevErr(c, sub, err) // the connection's own logging
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
func (s *Server) unsubscribe() {
	for _, sub := range s.notices.subs {
		sub.Unsubscribe() //nolint:errcheck // the connection may be closed
	}
	s.notices.subs = nil
	if s.notices.nc != nil {
		s.notices.nc.SetReconnectHandler(s.notices.prevReconnect)
		s.notices.nc.SetDisconnectErrHandler(s.notices.prevDisconnect)
		s.notices.nc.SetErrorHandler(s.notices.prevErr)
		s.notices.nc = nil
	}
}

// forgetHeld drops what the node holds of the cache (node memory, and the
// search index reloads): change notices may have been missed.
func (s *Server) forgetHeld() {
	if s.reader != nil {
		s.reader.Forget()
	}
}

// noticeSubs is the node's subscription to the key and change notices: the
// subscriptions, the connection's handlers it wrapped (given back by
// unsubscribe) and the change subscription's drop count last seen.
type noticeSubs struct {
	subs           []*nats.Subscription
	dropped        atomic.Int64
	nc             *nats.Conn
	prevReconnect  nats.ConnHandler
	prevDisconnect nats.ConnErrHandler
	prevErr        nats.ErrHandler
}
