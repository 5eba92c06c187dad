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
	keyGen, _ := c.Locals(localKeyGen).(uint64)
	release := s.slotReleaser(info)
	hooked := onConnClose(fctx.Conn(), release)
	tuneStreamSocket(fctx.Conn())
	err = s.upgrader.Upgrade(fctx, func(ws *websocket.Conn) {
		if !hooked {
			defer release()
		}
		conn, err := s.hub.Add(ws, info, release)
		if err != nil {
			ws.WriteControl(websocket.CloseMessage, //nolint:errcheck // the node is going away either way
				websocket.FormatCloseMessage(stream.CloseGoingAway, "the server is shutting down"), time.Now().Add(time.Second))
			return
		}
		// A key notice between the key's check and now found no stream
		// to recheck: this one is rechecked.
		if s.keys.gen.Load() != keyGen {
			s.recheckStreams("", info.KeyID)
		}
		// A key that expires while its stream is open closes it (4401).
		expiry := time.AfterFunc(time.Until(expires), func() {
			conn.Close(stream.CloseRevoked, "the API key expired")
		})
		defer expiry.Stop()
		conn.Serve(s.streamCtx)
	})
	if err != nil {
		release()
	}
	return nil
}

// slotReleaser gives a stream's slot back, once, in the background: the
// connection's end must not wait on Redis. Shutdown waits for the releases
// begun (bounded), so that a client reconnecting to another node during a
// rolling restart finds its slots free.
func (s *Server) slotReleaser(info stream.Info) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.releasing.Add(1)
			go func() {
				defer s.releasing.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				s.slots.Close(ctx, info.AccountID, info.ID)
			}()
		})
	}
}

// recheckStreams closes the streams whose key changed: after a key notice
// (an account or a key; both empty: every stream, after a flush of the key
// cache), it looks each affected key up again (the cache dropped it, so
// Postgres answers) and closes 4401 when the key is revoked, expired or
// gone, 4403 when the account's access was withdrawn. A lookup that fails
// (Postgres down) closes nothing: the cache's stale copy rules then, as for
// requests. Rechecks run in the background, one pass at a time: what is
// asked while one runs is merged into the next pass, named keys and
// accounts before the rest, with a few lookups in flight. The contract's
// 1 s holds while Postgres answers the pass within it.
func (s *Server) recheckStreams(accountID, keyID string) {
	if s.hub == nil {
		return
	}
	r := &s.rechecks
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case accountID == "" && keyID == "":
		r.all = true
	default:
		if r.accounts == nil {
			r.accounts, r.keys = map[string]bool{}, map[string]bool{}
		}
		if accountID != "" {
			r.accounts[accountID] = true
		}
		if keyID != "" {
			r.keys[keyID] = true
		}
	}
	if !r.running {
		r.running = true
		go s.runRechecks()
	}
}

// rechecks is what recheckStreams was asked and has not checked yet.
type rechecks struct {
	mu             sync.Mutex
	running, all   bool
	accounts, keys map[string]bool
}

// recheckLookups bounds the key lookups of a pass in flight.
const recheckLookups = 8

func (s *Server) runRechecks() {
	r := &s.rechecks
	for {
		r.mu.Lock()
		all, accounts, keys := r.all, r.accounts, r.keys
		r.all, r.accounts, r.keys = false, nil, nil
		if !all && len(accounts) == 0 && len(keys) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		var named, rest []*stream.Conn
		s.hub.Each(func(c *stream.Conn) {
			switch {
			case accounts[c.Info.AccountID] || keys[c.Info.KeyID]:
				named = append(named, c)
			case all:
				rest = append(rest, c)
			}
		})
		s.recheckPass(append(named, rest...))
	}
}

// recheckPass looks up each distinct key of conns once and closes the
// streams its verdict says.
func (s *Server) recheckPass(conns []*stream.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byKey := map[string][]*stream.Conn{}
	var order []string
	for _, c := range conns {
		h := string(c.Info.KeyHash)
		if _, ok := byKey[h]; !ok {
			order = append(order, h)
		}
		byKey[h] = append(byKey[h], c)
	}
	sem := make(chan struct{}, recheckLookups)
	var wg sync.WaitGroup
	for _, h := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rec, err := s.keys.get(ctx, []byte(h))
			if err != nil {
				return
			}
			if code, reason := s.streamVerdict(rec.credential()); code != 0 {
				for _, c := range byKey[h] {
					c.Close(code, reason)
				}
			}
		})
	}
	wg.Wait()
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
