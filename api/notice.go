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
