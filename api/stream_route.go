package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/api/edge"
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

// newUpgrader upgrades GET /public/v1/stream on the connection itself,
// once fasthttp has let go of it (stream). Streams authenticate by the
// Authorization header, never by cookie, so a page on another origin gains
// nothing by opening one: every origin may (a browser cannot set the
// header on a WebSocket anyway). The read buffer is small (commands are
// rare and short); the hub frames and writes what it sends itself, with
// buffers from a pool (api/stream/writer.go), so an idle stream holds no
// write buffer.
func (s *Server) newUpgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		// 0: the connection reads through the reader hijacked gives it
		// (streamReadBuffer bytes), which the input wait looks into.
		ReadBufferSize:  0,
		WriteBufferSize: 4096,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, _ int, _ error) {
			// Not reached for what stream() checks first; the connection
			// is closed after this answer.
			w.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")) //nolint:errcheck // closed next
		},
	}
}

// streamReadBuffer is a stream's read buffer: commands are rare and short,
// and a longer message is read through it in pieces. The upgrader uses a
// hijacked reader as it is only when it is bigger than 256 bytes.
const streamReadBuffer = 257

// hijacked is a stream's connection as the net/http upgrader wants it:
// the upgrader writes the 101 answer on it itself, and reads the
// connection through br.
type hijacked struct {
	c  net.Conn
	h  http.Header
	br *bufio.Reader
	sc *streamConn
}

func (w *hijacked) Header() http.Header         { return w.h }
func (w *hijacked) Write(b []byte) (int, error) { return w.c.Write(b) }
func (w *hijacked) WriteHeader(int)             {}
func (w *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.br = bufio.NewReaderSize(w.c, streamReadBuffer)
	w.sc = &streamConn{Conn: w.c}
	return w.sc, bufio.NewReadWriter(w.br, bufio.NewWriterSize(w.c, 16)), nil
}

// streamConn is a stream's connection as the WebSocket library holds it.
// Once the upgrade is answered, the library writes to it only on its own,
// to close a stream whose client broke the protocol (1002) or sent a
// message over the read limit (1009): those writes never wait for room on
// the socket (what it does not take is dropped: the stream ends anyway).
// So the socket's write lock they take never holds up a fan-out worker's
// write (stream.Output) behind a client that reads nothing. The stream's
// writer writes to the connection under it (Underlying): pongs, closes
// and the answer to a client's close are its frames.
type streamConn struct {
	net.Conn
	upgraded atomic.Bool
}

// errStreamSocketFull: a library write the socket had no room for.
var errStreamSocketFull = errors.New("the stream's socket is full: the close frame is dropped")

func (c *streamConn) Write(b []byte) (int, error) {
	if !c.upgraded.Load() {
		return c.Conn.Write(b) // the 101 answer
	}
	out := newStreamOutput(c.Conn)
	if out == nil {
		return c.Conn.Write(b)
	}
	n, err := out.TryWrite(b)
	if err == nil && n < len(b) {
		err = errStreamSocketFull
	}
	return n, err
}

// Underlying is the connection the stream writes to itself.
func (c *streamConn) Underlying() net.Conn { return c.Conn }

// handshake is what the upgrade needs of the request and of the front
// door's answer (request id, RateLimit headers), copied: fasthttp reuses
// both once the handler returns.
func handshake(fctx *fasthttp.RequestCtx) (*http.Request, http.Header) {
	req := &http.Request{Method: http.MethodGet, Header: http.Header{}}
	fctx.Request.Header.VisitAll(func(k, v []byte) {
		req.Header.Add(string(k), string(v))
	})
	answer := http.Header{}
	fctx.Response.Header.VisitAll(func(k, v []byte) {
		switch http.CanonicalHeaderKey(string(k)) {
		case "Content-Type", "Content-Length", "Connection", "Upgrade", "Server", "Date",
			"Sec-Websocket-Accept", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol":
		default:
			answer.Add(string(k), string(v))
		}
	})
	return req, answer
}

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
	ok, retry, err := s.slots.Open(c.UserContext(), info.AccountID, info.ID)
	if err != nil {
		s.limitsWarn.Log(c.UserContext(), s.log, slog.LevelWarn, "stream limit decided by this node alone", "err", err)
	}
	if !ok {
		return &Error{Kind: KindRateLimited, Message: "the account has as many streams open as it may: close one first", RetryAfter: retry}
	}
	keyGen, _ := c.Locals(localKeyGen).(uint64)
	release := s.slotReleaser(info)
	hooked := edge.OnClose(fctx.Conn(), release)
	tuneStreamSocket(fctx.Conn())
	// The stream takes the connection itself (fasthttp's own, not its
	// hijack wrapper) and its own goroutine, and the server lets go of it
	// (Server.KeepHijackedConns): the wrapper reads through the server's
	// 16 KiB request buffer, which with the request context would stay
	// held for the stream's life. The upgrader writes the 101 answer.
	req, answer := handshake(fctx)
	fctx.SetStatusCode(fiber.StatusSwitchingProtocols)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(hc net.Conn) {
		nc := hc
		if u, ok := hc.(interface{ UnsafeConn() net.Conn }); ok {
			nc = u.UnsafeConn()
		}
		hj := &hijacked{c: nc, h: http.Header{}}
		ws, err := s.upgrader.Upgrade(hj, req, answer)
		if err != nil {
			nc.Close() // refused
			if !hooked {
				release()
			}
			return
		}
		hj.sc.upgraded.Store(true)
		go s.serveStream(ws, nc, hj.br, info, release, hooked, keyGen)
	})
	return nil
}

// serveStream runs an upgraded stream until it ends, then closes its
// connection (which gives the slot back when the connection is hooked).
func (s *Server) serveStream(ws *websocket.Conn, nc net.Conn, br *bufio.Reader, info stream.Info, release func(), hooked bool, keyGen uint64) {
	defer nc.Close() // the stream is over
	if !hooked {
		defer release()
	}
	conn, err := s.hub.Add(ws, info, release)
	if err != nil {
		ws.WriteControl(websocket.CloseMessage, //nolint:errcheck // the node is going away either way
			websocket.FormatCloseMessage(stream.CloseGoingAway, "the server is shutting down"), time.Now().Add(time.Second))
		return
	}
	// A key notice between the key's check and now found no stream to
	// recheck: this one is rechecked.
	if s.keys.gen.Load() != keyGen {
		s.recheckStreams("", info.KeyID)
	}
	if in := newStreamInput(nc, br); in != nil {
		conn.SetInput(in)
	}
	if out := newStreamOutput(nc); out != nil {
		conn.SetOutput(out)
	}
	conn.Serve(s.streamCtx)
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
