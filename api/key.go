package api

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
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

// getKey describes the calling key; it needs no scope.
func (s *Server) getKey(c *fiber.Ctx) error {
	cred := credential(c)
	if cred == nil {
		return errNoCredential
	}
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
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(keyInfo{
		KeyID: k.ID, Last4: k.Last4, AccountID: cred.Account.ID, Scopes: scopes, IPAllowlist: cidrs,
		CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC(),
		Limit: lc.Limit, WindowS: int64(lc.Window / time.Second),
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
