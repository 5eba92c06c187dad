package api

// GET /public/v1/stream: the route checks the request and takes a slot;
// the node's streams (streams.go) take the connection over.

import (
	"encoding/base64"
	"log/slog"

	"github.com/fasthttp/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/api/stream"
)

// validKey reports whether a Sec-WebSocket-Key is 16 bytes in base64, as
// the upgrader requires: a bad one is refused before the connection is
// taken over.
func validKey(k []byte) bool {
	n, err := base64.StdEncoding.Decode(make([]byte, base64.StdEncoding.DecodedLen(len(k))), k)
	return err == nil && n == 16
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
	case !validKey(fctx.Request.Header.Peek("Sec-Websocket-Key")):
		return fail(KindInvalidRequest, "the WebSocket upgrade's Sec-WebSocket-Key is not 16 bytes in base64")
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
		// A key that expires while its stream is open closes it (4401).
		ExpiresAt: cred.Key.ExpiresAt,
	}
	ok, retry, err := s.streams.open(c.UserContext(), info)
	if err != nil {
		s.limitsWarn.Log(c.UserContext(), s.log, slog.LevelWarn, "stream limit decided by this node alone", "err", err)
	}
	if !ok {
		return &Error{Kind: KindRateLimited, Message: "the account has as many streams open as it may: close one first", RetryAfter: retry}
	}
	keyGen, _ := c.Locals(localKeyGen).(uint64)
	s.streams.take(fctx, info, keyGen)
	return nil
}
