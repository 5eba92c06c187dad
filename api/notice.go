package api

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

// keyNotice is published by the key and access commands on KeyNoticeSubject.
type keyNotice struct {
	AccountID string `json:"account_id"`
	KeyID     string `json:"key_id"`
}

// onKeyNotice drops what this node cached of the changed account or key, so
// revocation and withdrawal take effect here within the notice's latency.
func (s *Server) onKeyNotice(m *nats.Msg) {
	var n keyNotice
	if err := json.Unmarshal(m.Data, &n); err != nil || (n.AccountID == "" && n.KeyID == "") {
		// Unreadable: be safe and drop everything.
		s.keys.flush()
		return
	}
	s.keys.invalidate(n.AccountID, n.KeyID)
}
