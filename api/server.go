// Package api is one stateless HTTP API node (Fiber v2): the front door every
// request passes (request id, CORS, client address, failed-auth block, key,
// access, IP allowlist, scope, per-account window) and the routes behind it.
package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/marketdata/marketdata/api/edge"
	"github.com/marketdata/marketdata/api/search"
	"github.com/marketdata/marketdata/api/usage"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

// Deps are the node's collaborators.
type Deps struct {
	Credentials Credentials
	// Reader answers the data routes (node memory, Redis, Postgres); nil:
	// the node has only the front door (/key). Its metrics are registered
	// on Registry, and the node feeds it the change notices.
	Reader  *cache.Reader
	Limiter *ratelimit.Limiter
	// StreamSlots counts the accounts' open streams across nodes
	// (ratelimit.Streams); nil: the node serves no streams.
	StreamSlots StreamSlots
	// NC receives key and change notices and presence; nil in some tests.
	NC *nats.Conn
	// Usage keeps the accounts' usage counts (the primary: store.Store);
	// nil: the node neither counts nor serves /account/usage.
	Usage usage.Store
	// Candles reads the candles route's answers (the read pool); nil:
	// the route is not served.
	Candles  Candles
	Log      *slog.Logger
	Now      func() time.Time
	Registry prometheus.Registerer
}

// Server is one API node: its routes and the middleware in front of them.
// What the node keeps beside them is a type each: the streams, the usage
// ledger and the notices.
type Server struct {
	cfg      Config
	app      *fiber.App
	keys     *keyCache
	limiter  *ratelimit.Limiter
	log      *slog.Logger
	now      func() time.Time
	origins  map[string]bool
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	hasher   *store.Hasher
	reader   *cache.Reader
	search   *search.Index
	// edgeMetrics count the listener's connections and refused accepts.
	edgeMetrics *edge.Metrics
	// streams are the node's WebSocket streams (nil: none served).
	streams *streams
	// usage counts the requests that passed the window and lists them for
	// /account/usage (nil: neither).
	usage *usage.Ledger
	// notices follow the key and change notices and the credentials
	// version.
	notices *notices
	// limitsWarn and authFailWarn keep the "decided by this node alone"
	// WARNs (one per request while Redis is down) to one per 10 s.
	limitsWarn, authFailWarn ratelog.Limiter
	// accountKeys serves /account/keys: the Credentials source, when it
	// can list keys (nil: the route is not served).
	accountKeys AccountKeys
	// candleStore and candleMemo serve the candles route (nil: not
	// served): Postgres, and the answers kept in node memory.
	candleStore Candles
	candleMemo  *candleMemo
}

// New builds a node; Serve starts it.
func New(cfg Config, d Deps) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	s := &Server{
		cfg: cfg, limiter: d.Limiter, log: d.Log, now: d.Now, origins: map[string]bool{cfg.DocsOrigin: true},
		hasher: store.NewHasher(cfg.KeyPepper), reader: d.Reader,
	}
	s.accountKeys, _ = d.Credentials.(AccountKeys)
	for _, o := range cfg.AppOrigins {
		s.origins[o] = true
	}
	if d.Reader != nil && d.Candles != nil {
		s.candleStore, s.candleMemo = d.Candles, newCandleMemo(d.Now)
		d.Reader.OnChange(s.candleMemo.notice)
	}
	if d.Reader != nil {
		s.search = search.New(d.Reader, d.Log)
		if err := d.Reader.Register(d.Registry); err != nil {
			return nil, fmt.Errorf("api: register the reader's metrics: %w", err)
		}
	}
	serveStreams := d.Reader != nil && d.StreamSlots != nil
	// recheck tells open streams that a key or account changed (nil: no
	// streams served). The streams are built after the key cache, which
	// they look keys up in; nothing changes a key before New returns.
	var recheck func(accountID, keyID string)
	if serveStreams {
		recheck = func(accountID, keyID string) { s.streams.recheck(accountID, keyID) }
	}
	f := promauto.With(d.Registry)
	s.requests = f.NewCounterVec(prometheus.CounterOpts{
		Name: "marketdata_http_requests_total", Help: "API answers by route and status.",
	}, []string{"route", "status"})
	s.keys = newKeyCache(d.Credentials, keyCacheOptions{
		TTL: cfg.KeyCacheTTL, StaleMax: cfg.KeyStaleMax, Size: keyCacheSize, Now: d.Now, Log: d.Log,
		Render: s.renderKey, OnChange: recheck,
		ServedStale: f.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_api_keys_served_stale_total",
			Help: "Requests whose key was accepted from the node's memory because Postgres could not be reached (MD_KEY_STALE_MAX).",
		}),
	})
	s.latency = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marketdata_http_request_seconds", Help: "API answer time by route.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"route"})
	// The search index follows the change notices after node memory, and
	// the streams after both.
	s.notices = newNotices(cfg, s.keys, d.Reader, s.search, d.Log)
	if serveStreams {
		var err error
		if s.streams, err = newStreams(d.Reader, cfg.Stream, d.StreamSlots, s.keys, d.Now, d.Log, d.Registry); err != nil {
			return nil, err
		}
	}
	if d.Usage != nil {
		s.usage = usage.New(d.Usage, usage.Options{
			Count: cfg.CountUsage, Interval: cfg.UsageFlush, Node: requestIDPrefix, Log: d.Log, Now: d.Now,
		})
	}

	s.edgeMetrics = edge.NewMetrics(d.Registry)

	s.app = fiber.New(fiber.Config{
		ErrorHandler:          errorHandler(d.Log),
		DisableStartupMessage: true,
		// No ReadTimeout or IdleTimeout here: fasthttp's ReadTimeout also
		// runs while a new connection waits for its first request and then
		// answers it 408 unasked. Each connection keeps the contract's
		// deadlines itself (edge.Conn): RequestTimeout from a request's
		// first byte, IdleTimeout between requests, closed quietly.
		WriteTimeout: 10 * time.Second,
		// The read buffer bounds the request line and headers together
		// (contract: 16 KiB, more is 431). Idle connections give their
		// buffers back (ReduceMemoryUsage), so 10,000 idle keep-alive
		// connections do not hold 160 MB of read buffers.
		ReadBufferSize:    edge.MaxHeaderBytes,
		ReduceMemoryUsage: true,
		// An answer (headers and body) up to this size leaves in one
		// write(2): a 50-id snapshot is some 20 KB and an /events page of
		// 100 up to 60 KB, which Fiber's default 4 KiB buffer sent in two
		// writes or more. The buffers are pooled per answer being
		// written, not held by idle connections.
		WriteBufferSize: responseWriteBuffer,
		BodyLimit:       edge.MaxBodyBytes,
		JSONEncoder:     marshalJSON,
	})
	// A request fasthttp cannot read gets a fixed answer; Fiber's own
	// handler would pass the parser's text, which quotes the request.
	srv := s.app.Server()
	srv.ErrorHandler = s.readError
	srv.SecureErrorLogMessage = true
	srv.ConnState = edge.ConnState
	// A stream closes its own connection (streams.go): the server
	// lets go of it at the upgrade, with its request buffer.
	srv.KeepHijackedConns = true
	s.routes()
	if d.NC != nil {
		if err := s.notices.subscribe(d.NC); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) routes() {
	// A panic becomes an error (503 unavailable, logged), never a crash.
	s.app.Use(s.observe, recover.New(), s.requestID, s.refuseMalformed, s.cors)
	v1 := s.app.Group("/public/v1")
	v1.Get("/openapi.json", s.openAPI)
	v1.Get("/key", s.guard(""), s.getKey)
	if s.reader != nil {
		v1.Get("/events", s.guard(store.ScopeMarketsRead), s.listEvents)
		v1.Get("/events/:universal_id", s.guard(store.ScopeMarketsRead), s.getEvent)
		v1.Get("/markets/search", s.guard(store.ScopeMarketsRead), s.searchEvents)
		v1.Get("/markets/:universal_id/trades", s.guard(store.ScopeMarketsRead), s.trades)
		v1.Get("/prices/snapshot", s.guard(store.ScopeMarketsRead), s.snapshot)
	}
	if s.candleStore != nil {
		v1.Get("/markets/:universal_id/candles", s.guard(store.ScopeMarketsRead), s.candles)
	}
	if s.accountKeys != nil {
		v1.Get("/account/keys", s.guard(store.ScopeAccountRead), s.listAccountKeys)
	}
	if s.streams != nil {
		v1.Get("/stream", s.guard(store.ScopeStreamRead), s.stream)
	}
	if s.usage != nil {
		v1.Get("/account/usage", s.guard(store.ScopeAccountRead), s.accountUsage)
	}
	// Anything else under /public/v1 passes the same checks, then is 404.
	v1.Use(s.guard(""), func(c *fiber.Ctx) error {
		if err := s.admit(c); err != nil {
			return err
		}
		return fail(KindNotFound, "no such route: see /public/v1/openapi.json")
	})
}

// App exposes the Fiber app (tests use App().Test).
func (s *Server) App() *fiber.App { return s.app }

// Start loads what the node keeps in memory (the search index) in the
// background, retrying until Redis or Postgres answers, and keeps it fresh
// until ctx is done. The node is not Ready before the index is loaded.
func (s *Server) Start(ctx context.Context) error {
	s.notices.watchCredentials(ctx)
	if s.streams != nil {
		s.streams.start(ctx)
	}
	if s.usage != nil {
		s.usage.Start()
	}
	if s.search == nil {
		return nil
	}
	go s.search.Serve(ctx, s.cfg.SearchResync)
	return nil
}

// Serve answers on ln until Shutdown, behind the edge (contract, HTTP
// edge): at most Config.MaxConns open connections, an accept the system
// refuses for want of descriptors or memory waits and retries (the node
// never exits because of its clients), and every connection keeps the
// request and idle deadlines.
func (s *Server) Serve(ln net.Listener) error {
	return s.app.Listener(edge.NewListener(ln, s.cfg.MaxConns, s.cfg.RequestTimeout, s.cfg.IdleTimeout, s.edgeMetrics, s.log))
}

// Shutdown stops accepting connections, closes the streams (1001; fasthttp
// does not track the connections it handed over), waits for in-flight
// requests and writes the usage counted since the last flush.
func (s *Server) Shutdown(ctx context.Context) error {
	s.notices.unsubscribe()
	if s.streams != nil {
		s.streams.shutdown(ctx)
	}
	err := s.app.ShutdownWithContext(ctx)
	if s.usage != nil {
		// After the drain: every request answered is in this last batch.
		if ferr := s.usage.Close(ctx); ferr != nil {
			s.log.Error("usage counts of the node's last interval not written", "err", ferr)
		}
	}
	return err
}
