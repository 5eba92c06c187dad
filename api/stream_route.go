package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/store"
)

// StreamSlots is the per-account limit of open streams across all nodes
// (ratelimit.Streams): Open takes a slot for stream id, Close gives it
// back. Open's error says Redis did not answer and the node decided alone.
type StreamSlots interface {
	Open(ctx context.Context, account, id string) (ok bool, retryAfter time.Duration, err error)
	Close(ctx context.Context, account, id string)
}

// streamUpgrader upgrades GET /public/v1/stream. Streams authenticate by
// the Authorization header, never by cookie, so a page on another origin
// gains nothing by opening one: every origin may (a browser cannot set the
// header on a WebSocket anyway). The read buffer is small (commands are
// rare and short); write buffers come from a pool and go back between
// writes, so an idle stream holds none.
func (s *Server) newUpgrader() *websocket.FastHTTPUpgrader {
	return &websocket.FastHTTPUpgrader{
		ReadBufferSize:  512,
		WriteBufferSize: 4096,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     func(*fasthttp.RequestCtx) bool { return true },
		Error: func(ctx *fasthttp.RequestCtx, status int, reason error) {
			// Not reached for what stream() checks first; the handshake's
			// own text is not echoed.
			writeErrorBody(ctx, fiber.StatusUnprocessableEntity, "invalid_request",
				"the WebSocket handshake was refused: send a WebSocket version 13 upgrade")
		},
	}
}

// writeErrorBody writes the contract's error body on a raw fasthttp answer.
func writeErrorBody(ctx *fasthttp.RequestCtx, status int, code, message string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType(fiber.MIMEApplicationJSONCharsetUTF8)
	var body errorBody
	body.Error.Code, body.Error.Message = code, message
	b, _ := marshalJSON(body) // strings only
	ctx.Response.Header.Set(fiber.HeaderCacheControl, "no-store")
	ctx.SetBody(b)
}

// stream is GET /public/v1/stream: after the front door (the guard, then
// the window: the upgrade counts as one request), a request that is not a
// WebSocket upgrade is 422, the account's 11th open stream is 429, and
// the rest upgrade.
func (s *Server) stream(c *fiber.Ctx) error {
	if err := s.admit(c); err != nil {
		return err
	}
	fctx := c.Context()
	switch {
	case !websocket.FastHTTPIsWebSocketUpgrade(fctx):
		c.Set(fiber.HeaderUpgrade, "websocket")
		return fail(KindInvalidRequest, "this route is a WebSocket: send Connection: Upgrade and Upgrade: websocket")
	case string(fctx.Request.Header.Peek("Sec-Websocket-Version")) != "13":
		c.Set("Sec-WebSocket-Version", "13")
		return fail(KindInvalidRequest, "unsupported WebSocket version: send Sec-WebSocket-Version: 13")
	case len(fctx.Request.Header.Peek("Sec-Websocket-Key")) == 0:
		return fail(KindInvalidRequest, "the WebSocket upgrade has no Sec-WebSocket-Key")
	}
	rec := keyRecordOf(c)
	cred := rec.credential()
	if cred == nil {
		return errNoCredential
	}
	secret, _ := bearer(c.Get(fiber.HeaderAuthorization)) // the guard accepted it
	info := stream.Info{
		ID:        newRequestID(), // unique across nodes: this process's prefix and a counter
		AccountID: cred.Account.ID,
		KeyID:     cred.Key.ID,
		KeyHash:   s.hasher.Hash(nil, secret),
	}
	ok, retry, err := s.slots.Open(c.UserContext(), info.AccountID, info.ID)
	if err != nil {
		s.limitsWarn.Log(c.UserContext(), s.log, slog.LevelWarn, "stream limit decided by this node alone", "err", err)
	}
	if !ok {
		return &Error{Kind: KindRateLimited, Message: "the account has as many streams open as it may: close one first", RetryAfter: retry}
	}
	expires := cred.Key.ExpiresAt
	tuneStreamSocket(fctx.Conn())
	err = s.upgrader.Upgrade(fctx, func(ws *websocket.Conn) {
		release := func() { s.releaseSlot(info) }
		conn, err := s.hub.Add(ws, info, release)
		if err != nil {
			release()
			ws.WriteControl(websocket.CloseMessage, //nolint:errcheck // the node is going away either way
				websocket.FormatCloseMessage(stream.CloseGoingAway, "the server is shutting down"), time.Now().Add(time.Second))
			return
		}
		// A key that expires while its stream is open closes it (4401).
		expiry := time.AfterFunc(time.Until(expires), func() {
			conn.Close(stream.CloseRevoked, "the API key expired")
		})
		defer expiry.Stop()
		conn.Serve(s.streamCtx)
	})
	if err != nil {
		s.releaseSlot(info)
	}
	return nil
}

// releaseSlot gives a stream's slot back, in the background: it must not
// hold the connection's end on Redis.
func (s *Server) releaseSlot(info stream.Info) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.slots.Close(ctx, info.AccountID, info.ID)
	}()
}

// recheckStreams closes the streams whose key changed: after a key notice
// (an account or a key; both empty: every stream, after a flush of the
// key cache), it looks each affected key up again (the cache dropped it,
// so Postgres answers) and closes 4401 when the key is revoked, expired or
// gone, 4403 when the account's access was withdrawn. A lookup that fails
// (Postgres down) closes nothing: the cache's stale copy rules then, as for
// requests. It runs in the background; the contract's 1 s holds while
// Postgres answers within it.
func (s *Server) recheckStreams(accountID, keyID string) {
	if s.hub == nil {
		return
	}
	all := accountID == "" && keyID == ""
	var conns []*stream.Conn
	s.hub.Each(func(c *stream.Conn) {
		if all || (accountID != "" && c.Info.AccountID == accountID) || (keyID != "" && c.Info.KeyID == keyID) {
			conns = append(conns, c)
		}
	})
	if len(conns) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		type verdict struct {
			code   int
			reason string
			err    error
		}
		seen := map[string]verdict{}
		for _, c := range conns {
			v, ok := seen[string(c.Info.KeyHash)]
			if !ok {
				rec, err := s.keys.get(ctx, c.Info.KeyHash)
				v.err = err
				if err == nil {
					v.code, v.reason = s.streamVerdict(rec.credential())
				}
				seen[string(c.Info.KeyHash)] = v
			}
			if v.err == nil && v.code != 0 {
				c.Close(v.code, v.reason)
			}
		}
	}()
}

// streamVerdict is the close a stream's key calls for now (0: none).
func (s *Server) streamVerdict(cred *store.Credential) (int, string) {
	switch {
	case cred == nil:
		return stream.CloseRevoked, "the API key no longer exists"
	case cred.Key.RevokedAt != nil:
		return stream.CloseRevoked, "the API key was revoked"
	case !s.now().Before(cred.Key.ExpiresAt):
		return stream.CloseRevoked, "the API key expired"
	case !cred.Account.AccessGranted:
		return stream.CloseAccessRemoved, "the account's API access was withdrawn"
	}
	return 0, ""
}
