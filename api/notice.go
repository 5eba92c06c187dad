package api

import (
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
		if d, err := m.Sub.Dropped(); err == nil && int64(d) > s.noticesDropped.Load() {
			s.noticesDropped.Store(int64(d))
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
