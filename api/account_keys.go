package api

import (
	"context"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/store"
)

// AccountKeys lists an account's keys a page at a time (store.Store does).
// A node's Credentials source that implements it serves /account/keys: in
// production that is the primary, the store keys are authenticated from, so
// a key created a moment ago on another node is both usable and listed.
type AccountKeys interface {
	AccountKeys(ctx context.Context, accountID, status, after string, limit int, now time.Time) ([]store.Key, error)
}

var _ AccountKeys = (*store.Store)(nil)

// parseKeyStatus reads the status filter: absent lists every key.
func parseKeyStatus(raw string) (string, *Error) {
	for _, st := range store.KeyStates {
		if raw == st {
			return st, nil
		}
	}
	if raw == "" {
		return "", nil
	}
	return "", invalidParam("status must be one of " + strings.Join(store.KeyStates, ", ") + " (or absent for every key)")
}

// listAccountKeys answers GET /account/keys: a page of the caller's
// account's keys in ascending key_id order, walked with a cursor bound to
// the route, the status filter and the account. Keys are read from the
// store the node authenticates from (the primary), never from a cache: the
// list is rare and must show a key made a moment ago on any node.
func (s *Server) listAccountKeys(c *fiber.Ctx) error {
	limit, perr := parseLimit(param(c, "limit"), 50, 100)
	var status string
	if perr == nil {
		status, perr = parseKeyStatus(param(c, "status"))
	}
	cred := credential(c)
	if cred == nil {
		return errNoCredential
	}
	binding := cursorBinding{route: "account_keys", account: cred.Account.ID, filters: status}
	var after string
	if cursor := c.Query("cursor"); perr == nil && cursor != "" {
		var err error
		if after, err = decodeCursor(s.cfg.CursorSecret, binding, cursor); err != nil {
			perr = invalidParam("cursor is malformed, altered, or was issued for another status, another route or another account")
		}
	}
	// The window before parameters, as the contract orders.
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	now := s.now()
	// One more than the page shows: whether it is there says if a next
	// page exists.
	keys, err := s.accountKeys.AccountKeys(c.UserContext(), cred.Account.ID, status, after, limit+1, now)
	if err != nil {
		return readFailed(err)
	}
	var next []byte
	if len(keys) > limit {
		keys = keys[:limit]
		next = []byte(`"` + encodeCursor(s.cfg.CursorSecret, binding, keys[len(keys)-1].ID) + `"`)
	}
	items := make([][]byte, len(keys))
	for i := range keys {
		if items[i], err = marshalJSON(store.RecordOf(&keys[i], now)); err != nil {
			return err
		}
	}
	return sendList(c, items, next, true)
}
