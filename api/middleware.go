package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{8,64}$`)

// requestIDs are this process's random prefix and a counter: unique across
// nodes without a random read (a system call) per request.
var (
	requestIDPrefix = func() string {
		b := make([]byte, 6)
		rand.Read(b) // crypto/rand.Read never fails
		return hex.EncodeToString(b)
	}()
	requestIDSeq atomic.Uint64
)

// newRequestID is a fresh request id: this process's prefix and the next
// number.
func newRequestID() string {
	return requestIDPrefix + strconv.FormatUint(requestIDSeq.Add(1)+1<<40, 16)
}

// requestID puts X-Request-Id on every answer: the caller's, when it is a
// plain token, else a fresh one.
func (s *Server) requestID(c *fiber.Ctx) error {
	id := c.Get(fiber.HeaderXRequestID)
	if id == "" || !requestIDPattern.MatchString(id) {
		id = newRequestID()
	} else {
		id = strings.Clone(id) // Fiber reuses header memory after the handler
	}
	c.Locals(localRequestID, id)
	c.Set(fiber.HeaderXRequestID, id)
	return c.Next()
}

func requestID(c *fiber.Ctx) string {
	id, _ := c.Locals(localRequestID).(string)
	return id
}

// cors answers the documentation site and the operator's apps (contract §2):
// their requests get Access-Control-Allow-Origin and Vary: Origin, their
// preflights 204 allowing GET and Authorization, never credentials. Any other
// origin gets no CORS headers, and its preflight 400 origin_not_allowed.
func (s *Server) cors(c *fiber.Ctx) error {
	origin := c.Get(fiber.HeaderOrigin)
	preflight := c.Method() == fiber.MethodOptions && origin != "" &&
		c.Get(fiber.HeaderAccessControlRequestMethod) != ""
	if origin == "" {
		return c.Next()
	}
	if !s.origins[origin] {
		if preflight {
			return fail(KindOriginNotAllowed, "origin "+strings.Clone(origin)+" is not allowed to call this API from a browser")
		}
		return c.Next()
	}
	c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
	c.Vary(fiber.HeaderOrigin)
	if preflight {
		c.Set(fiber.HeaderAccessControlAllowMethods, "GET")
		c.Set(fiber.HeaderAccessControlAllowHeaders, "Authorization")
		c.Set(fiber.HeaderAccessControlMaxAge, "600")
		return c.SendStatus(fiber.StatusNoContent)
	}
	c.Set(fiber.HeaderAccessControlExposeHeaders,
		"X-Request-Id, ETag, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After")
	return c.Next()
}

func (s *Server) addr(c *fiber.Ctx) netip.Addr {
	if a, ok := c.Locals(localAddr).(netip.Addr); ok {
		return a
	}
	var peer netip.Addr
	if tcp, ok := c.Context().RemoteAddr().(interface{ AddrPort() netip.AddrPort }); ok {
		peer = tcp.AddrPort().Addr()
	} else {
		peer, _ = netip.ParseAddr(c.Context().RemoteIP().String())
	}
	var xff []string
	if len(s.cfg.TrustedProxies) > 0 && inAny(peer.Unmap(), s.cfg.TrustedProxies) {
		c.Request().Header.VisitAll(func(k, v []byte) {
			if strings.EqualFold(string(k), fiber.HeaderXForwardedFor) {
				xff = append(xff, string(v))
			}
		})
	}
	a := clientAddr(peer, xff, s.cfg.TrustedProxies)
	c.Locals(localAddr, a)
	return a
}

// bearer extracts the secret of "Authorization: Bearer <secret>".
func bearer(h string) (string, bool) {
	scheme, secret, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(secret), true
}

// guard runs the contract's first checks in order: failed-auth block of the
// address (429), key (401), access (403), IP allowlist (403), scope (403).
// Every 401 counts as one failed authentication of the address, on all
// nodes. The key, access, allowlist and scope are judged in memory; only a
// refusal asks Redis (whether the address is blocked, which wins). A request
// that passes goes on to its handler, which calls admit: the block and the
// account's window are checked there. An empty scope means the route needs
// none.
func (s *Server) guard(scope string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		addr := s.addr(c)
		if scope == store.ScopeStreamRead {
			// The key cache's invalidations before the key is looked up:
			// a stream opened on a key that changes meanwhile is rechecked.
			c.Locals(localKeyGen, s.keys.gen.Load())
		}
		rec, denied := s.judge(c, addr, scope)
		if denied != nil {
			if inAny(addr.Unmap(), s.cfg.AuthFailExempt) {
				return denied
			}
			// A block wins over any refusal; a 401 is counted in the same
			// atomic step that checks the block.
			var blocked bool
			var retry time.Duration
			var err error
			if denied.Kind == KindUnauthorized {
				blocked, retry, err = s.limiter.FailOrBlocked(ctx, addr.String())
			} else {
				blocked, retry, err = s.limiter.Blocked(ctx, addr.String())
			}
			if err != nil {
				// Once per request while Redis is down: rate-limited.
				s.authFailWarn.Log(ctx, s.log, slog.LevelWarn, "failed-auth limit decided by this node alone", "err", err)
			}
			if blocked {
				return blockedError(retry)
			}
			return denied
		}
		c.Locals(localCred, rec)
		return c.Next()
	}
}

// admit checks the address's block and the account's window in one Redis
// round trip (the limiter's, shared with concurrent requests) and puts the
// RateLimit headers on the answer. Handlers call it after validating their
// parameters in memory but answer 422 only after it: the window comes
// before parameters in the contract's order.
func (s *Server) admit(c *fiber.Ctx) error {
	cred := credential(c)
	if cred == nil {
		return errNoCredential
	}
	a, err := s.limiter.Admit(c.UserContext(), s.addr(c).String(), cred.Account.ID)
	if err != nil {
		// Once per request while Redis is down: rate-limited.
		s.limitsWarn.Log(c.UserContext(), s.log, slog.LevelWarn, "limits decided by this node alone", "err", err)
	}
	if a.Blocked {
		return blockedError(a.BlockedFor)
	}
	setLimitHeaders(c, a.Window)
	if !a.Window.Allowed {
		return &Error{Kind: KindRateLimited, Message: "the account's request limit for this window is used up", RetryAfter: a.Window.RetryAfter}
	}
	// Passed the window: the request counts in the account's usage.
	s.countUsage(c, cred.Account.ID)
	return nil
}

func blockedError(retry time.Duration) error {
	return &Error{Kind: KindRateLimited, Message: "too many failed authentications from this address", RetryAfter: retry}
}

// judge checks the key, access, allowlist and scope, all from memory (the
// key cache reads Postgres only on a miss), and returns the key's record.
func (s *Server) judge(c *fiber.Ctx, addr netip.Addr, scope string) (*keyRecord, *Error) {
	h := c.Get(fiber.HeaderAuthorization)
	if h == "" {
		return nil, fail(KindUnauthorized, "no API key: send Authorization: Bearer <key>")
	}
	secret, ok := bearer(h)
	if !ok {
		return nil, fail(KindUnauthorized, "malformed API key: expected Authorization: Bearer mdk_live_ followed by 43 characters")
	}
	// The secret's own checksum refuses a mistyped key before any lookup:
	// it costs no cache slot and no Postgres query, and the caller learns
	// that the key was damaged rather than that it does not exist.
	if err := store.CheckSecret(secret); err != nil {
		if errors.Is(err, store.ErrSecretChecksum) {
			return nil, fail(KindUnauthorized, "mistyped or truncated API key: its last 6 characters are not the checksum of the rest; send the key exactly as it was printed at creation")
		}
		reason := strings.TrimPrefix(err.Error(), store.ErrSecretMalformed.Error()+": ")
		return nil, fail(KindUnauthorized, "malformed API key: "+reason+"; expected Authorization: Bearer mdk_live_ followed by 43 characters")
	}
	var buf [32]byte
	rec, err := s.keys.get(c.UserContext(), s.hasher.Hash(buf[:0], secret))
	cred := rec.credential()
	switch {
	case err != nil:
		return nil, &Error{Kind: KindUnavailable, Message: "keys cannot be checked right now; try again", Err: err}
	case cred == nil:
		return nil, fail(KindUnauthorized, "unknown API key")
	case cred.Key.RevokedAt != nil:
		return nil, fail(KindUnauthorized, "the API key was revoked")
	case !s.now().Before(cred.Key.ExpiresAt):
		return nil, fail(KindUnauthorized, "the API key expired at "+cred.Key.ExpiresAt.Format(time.RFC3339))
	case !cred.Account.AccessGranted:
		return nil, fail(KindAccessNotGranted, "the key's account has no granted API access")
	case len(cred.Key.IPAllowlist) > 0 && !inAny(addr, cred.Key.IPAllowlist):
		return nil, fail(KindIPNotAllowed, "this key may not be used from "+addr.String())
	case scope != "" && !slices.Contains(cred.Key.Scopes, scope):
		return nil, fail(KindInsufficientScope, "this route needs a key with scope "+scope)
	}
	return rec, nil
}

func setLimitHeaders(c *fiber.Ctx, r ratelimit.Result) {
	c.Set("RateLimit-Limit", itoa(r.Limit))
	c.Set("RateLimit-Remaining", itoa(r.Remaining))
	c.Set("RateLimit-Reset", ratelimit.Seconds(r.ResetAfter))
}

// observe counts every answer by route template and status.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	if err != nil {
		// Let the error handler write the answer now, so the status is known.
		if herr := s.app.Config().ErrorHandler(c, err); herr != nil {
			return herr
		}
	}
	route := "unmatched"
	if r := c.Route(); r != nil && r.Path != "/" {
		route = r.Path
	}
	s.requests.WithLabelValues(route, strconv.Itoa(c.Response().StatusCode())).Inc()
	s.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	return nil
}

// credential is the authenticated key of the request.
func credential(c *fiber.Ctx) *store.Credential {
	return keyRecordOf(c).credential()
}

// keyRecordOf is the authenticated key of the request with its /key answer.
func keyRecordOf(c *fiber.Ctx) *keyRecord {
	rec, _ := c.Locals(localCred).(*keyRecord)
	return rec
}

type localKey int

const (
	localCred localKey = iota
	localAddr
	localRequestID
	localKeyGen
)

var errNoCredential = errors.New("api: route reached without a credential")
