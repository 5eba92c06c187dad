package api

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/store"
)

// keyInfo is the answer of GET /public/v1/key: the key's fields and the
// account's window.
type keyInfo struct {
	store.KeyFields
	Limit   int   `json:"limit"`
	WindowS int64 `json:"window_s"`
}

// getKey describes the calling key; it needs no scope. There is nothing to
// parse: the key is the one the guard judged, and its answer was rendered
// when its record was fetched (keyCache), so it is sent as is.
func (s *Server) getKey(c *fiber.Ctx) error {
	if err := s.admit(c); err != nil {
		return err
	}
	rec := keyRecordOf(c)
	body := rec.body
	if body == nil { // not rendered with the record (a render that failed)
		var err error
		if body, err = s.renderKey(rec.cred); err != nil {
			return err
		}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// renderKey is the GET /key answer for a key record.
func (s *Server) renderKey(cred *store.Credential) ([]byte, error) {
	return marshalJSON(s.keyInfo(cred))
}

func (s *Server) keyInfo(cred *store.Credential) keyInfo {
	f := store.FieldsOf(&cred.Key)
	f.AccountID = cred.Account.ID
	lc := s.limiter.Config()
	return keyInfo{KeyFields: f, Limit: lc.Limit, WindowS: int64(lc.Window / time.Second)}
}

func itoa(n int) string { return strconv.Itoa(n) }
