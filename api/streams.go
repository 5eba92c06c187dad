package api

// The node's streams as one subject: the hub that serves them, the
// per-account slots they hold across nodes, and (stream_recheck.go) the
// rechecks of their keys. The route that opens one is stream_route.go's.

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/api/edge"
	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/cache"
)

// StreamSlots is the per-account limit of open streams across all nodes
// (ratelimit.Streams): Open takes a slot for stream id, Close gives it
// back. Open's error says Redis did not answer and the node decided alone.
type StreamSlots interface {
	Open(ctx context.Context, account, id string) (ok bool, retryAfter time.Duration, err error)
	Close(ctx context.Context, account, id string)
}

// streams are the node's WebSocket streams.
type streams struct {
	hub      *stream.Hub
	slots    StreamSlots
	upgrader *websocket.Upgrader
	// keys are the node's key cache: a recheck looks a stream's key up in
	// it, and a stream opened while it changed is rechecked.
	keys *keyCache
	now  func() time.Time
	// ctx ends with Start's context: streams' reads stop with it.
	ctx context.Context
	// rechecks are the key rechecks asked for; releasing counts the slots
	// being given back.
	rechecks  rechecks
	releasing sync.WaitGroup
}

// newStreams builds the hub over reader, registers its metrics on reg and
// has it follow reader's change notices (after node memory, which the
// reader updates first).
func newStreams(reader *cache.Reader, cfg stream.Config, slots StreamSlots, keys *keyCache, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) (*streams, error) {
	hub, err := stream.New(reader, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("api: streams: %w", err)
	}
	if err := hub.Register(reg); err != nil {
		return nil, fmt.Errorf("api: register the streams' metrics: %w", err)
	}
	reader.OnChange(hub.OnChange)
	return &streams{
		hub: hub, slots: slots, upgrader: newUpgrader(), keys: keys, now: now, ctx: context.Background(),
	}, nil
}

// newUpgrader upgrades GET /public/v1/stream on the connection itself,
// once fasthttp has let go of it (take). Streams authenticate by the
// Authorization header, never by cookie, so a page on another origin gains
// nothing by opening one: every origin may (a browser cannot set the
// header on a WebSocket anyway). The read buffer is small (commands are
// rare and short); the hub frames and writes what it sends itself, with
// buffers from a pool (api/stream/writer.go), so an idle stream holds no
// write buffer.
func newUpgrader() *websocket.Upgrader {
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

// start runs the hub until ctx is done; the streams' reads stop with it.
func (st *streams) start(ctx context.Context) {
	st.ctx = ctx
	go st.hub.Run(ctx)
}

// shutdown closes the streams (1001) and waits, within a second of ctx,
// for their slots to be given back.
func (st *streams) shutdown(ctx context.Context) {
	// Closes are sent at once; a stream whose client does not answer is
	// cut after the hub's CloseWait.
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st.hub.Shutdown(sctx) //nolint:errcheck // what is left was cut; the HTTP side still shuts down
	// The slots go back before the node lets go of Redis: a client that
	// reconnects elsewhere finds them free.
	released := make(chan struct{})
	go func() { st.releasing.Wait(); close(released) }()
	select {
	case <-released:
	case <-sctx.Done():
	}
}

// open takes one of the account's stream slots for the stream.
func (st *streams) open(ctx context.Context, info stream.Info) (ok bool, retryAfter time.Duration, err error) {
	return st.slots.Open(ctx, info.AccountID, info.ID)
}

// take upgrades the request to the stream whose slot open took, and
// serves it. keyGen is the key cache's invalidations before the stream's
// key was looked up.
func (st *streams) take(fctx *fasthttp.RequestCtx, info stream.Info, keyGen uint64) {
	release := st.slotReleaser(info)
	hooked := edge.OnClose(fctx.Conn(), release)
	tuneStreamSocket(fctx.Conn())
	// The stream takes the connection itself (fasthttp's own, not its
	// hijack wrapper) and its own goroutine, and the server lets go of it
	// (Server.KeepHijackedConns): the wrapper reads through the server's
	// 16 KiB request buffer, which with the request context would stay
	// held for the stream's life. The upgrader writes the 101 answer.
	req, answer := handshake(fctx)
	fctx.SetStatusCode(http.StatusSwitchingProtocols)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(hc net.Conn) {
		nc := hc
		if u, ok := hc.(interface{ UnsafeConn() net.Conn }); ok {
			nc = u.UnsafeConn()
		}
		hj := &hijacked{c: nc, h: http.Header{}}
		ws, err := st.upgrader.Upgrade(hj, req, answer)
		if err != nil {
			nc.Close() // refused
			if !hooked {
				release()
			}
			return
		}
		hj.sc.upgraded.Store(true)
		go st.serve(ws, nc, hj.br, info, release, hooked, keyGen)
	})
}

// serve runs an upgraded stream until it ends, then closes its connection
// (which gives the slot back when the connection is hooked).
func (st *streams) serve(ws *websocket.Conn, nc net.Conn, br *bufio.Reader, info stream.Info, release func(), hooked bool, keyGen uint64) {
	defer nc.Close() // the stream is over
	if !hooked {
		defer release()
	}
	conn, err := st.hub.Add(ws, info, release)
	if err != nil {
		ws.WriteControl(websocket.CloseMessage, //nolint:errcheck // the node is going away either way
			websocket.FormatCloseMessage(stream.CloseGoingAway, "the server is shutting down"), time.Now().Add(time.Second))
		return
	}
	// A key notice between the key's check and now found no stream to
	// recheck: this one is rechecked.
	if st.keys.gen.Load() != keyGen {
		st.recheck("", info.KeyID)
	}
	if in := newStreamInput(nc, br); in != nil {
		conn.SetInput(in)
	}
	if out := newStreamOutput(nc); out != nil {
		conn.SetOutput(out)
	}
	conn.Serve(st.ctx)
}

// slotReleaser gives a stream's slot back, once, in the background: the
// connection's end must not wait on Redis. shutdown waits for the releases
// begun (bounded), so that a client reconnecting to another node during a
// rolling restart finds its slots free.
func (st *streams) slotReleaser(info stream.Info) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			st.releasing.Add(1)
			go func() {
				defer st.releasing.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				st.slots.Close(ctx, info.AccountID, info.ID)
			}()
		})
	}
}
