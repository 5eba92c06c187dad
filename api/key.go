package api

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/store"
)

// keyInfo is the answer of GET /public/v1/key.
type keyInfo struct {
	KeyID       string    `json:"key_id"`
	Last4       string    `json:"last4"`
	AccountID   string    `json:"account_id"`
	Scopes      []string  `json:"scopes"`
	IPAllowlist []string  `json:"ip_allowlist"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	Limit       int       `json:"limit"`
	WindowS     int64     `json:"window_s"`
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
	k := cred.Key
	cidrs := make([]string, len(k.IPAllowlist))
	for i, p := range k.IPAllowlist {
		cidrs[i] = p.String()
	}
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	lc := s.limiter.Config()
	return keyInfo{
		KeyID: k.ID, Last4: k.Last4, AccountID: cred.Account.ID, Scopes: scopes, IPAllowlist: cidrs,
		CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC(),
		Limit: lc.Limit, WindowS: int64(lc.Window / time.Second),
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
