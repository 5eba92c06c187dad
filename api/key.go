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

// keyBody is a rendered /key answer and the record it was rendered from.
type keyBody struct {
	cred *store.Credential
	body []byte
}

// getKey describes the calling key; it needs no scope. The answer is
// rendered once per cached record (a reloaded record is a new pointer).
func (s *Server) getKey(c *fiber.Ctx) error {
	if err := s.admit(c); err != nil {
		return err
	}
	cred := credential(c)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	if v, ok := s.keyBodies.Load(cred.Key.ID); ok && v.(*keyBody).cred == cred {
		return c.Send(v.(*keyBody).body)
	}
	body, err := marshalJSON(s.keyInfo(cred))
	if err != nil {
		return err
	}
	s.keyBodies.Store(cred.Key.ID, &keyBody{cred: cred, body: body})
	return c.Send(body)
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
