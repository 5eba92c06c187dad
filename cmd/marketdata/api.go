package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/api/edge"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) apiCmd() *cobra.Command {
	var noticeSubject string
	usage := true
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Run one stateless HTTP API node (run N of them behind any load balancer)",
		Long:  "Run one stateless HTTP API node (run N of them behind any load balancer).\n\n" + envHelp(forAPI, false),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSubject("--notice-subject", noticeSubject); err != nil {
				return err
			}
			cfg, err := LoadConfig(c.getenv, secretsRequired)
			if err != nil {
				return err
			}
			cfg.NoUsage = !usage
			log, err := c.logger()
			if err != nil {
				return err
			}
			log.Debug("garbage collection", "gogc", tuneAPIGC())
			return runAPI(cmd.Context(), cfg, noticeSubject, log, newRegistry(), nil)
		},
	}
	noticeFlag(cmd.Flags(), &noticeSubject, "subject of ingest's change notices (ingest's --notice-subject)")
	// Hidden: the usage benchmark's "off" run; not part of the
	// contract, which counts every request.
	cmd.Flags().BoolVar(&usage, "usage", true, "count requests in the accounts' usage")
	cmd.Flags().MarkHidden("usage") //nolint:errcheck // the flag was just defined
	return cmd
}

// runAPI runs one API node with its admin server until ctx is done, then
// drains in-flight requests. ready, when not nil, gets the bound addresses.
//
// The node starts while any dependency is down: it listens at once and
// reports not ready on /readyz until it can answer correctly (schema
// checked, search index loaded, Redis or Postgres answering); see
// apiChecks for what degrades it without draining it.
func runAPI(ctx context.Context, cfg *Config, noticeSubject string, log *slog.Logger, reg *prometheus.Registry, ready func(httpAddr, adminAddr string)) error {
	return runAPIOn(ctx, cfg, bound{}, noticeSubject, log, reg, ready)
}

// bound holds listeners a caller bound before starting a server (dev
// binds every port before it touches anything); a nil one is bound by the
// server itself, on its variable's address.
type bound struct {
	http, admin net.Listener
}

// listen returns ln when the caller bound it, else listens on addr; a
// failure names the variable that moves it.
func listen(ln net.Listener, name, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &configError{name, "cannot listen: " + err.Error()}
	}
	return ln, nil
}

// runAPIOn is runAPI on the listeners in b that the caller bound.
func runAPIOn(ctx context.Context, cfg *Config, b bound, noticeSubject string, log *slog.Logger, reg *prometheus.Registry, ready func(httpAddr, adminAddr string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	primary, closePrimary, err := openPool("MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer closePrimary()
	// Keys are read from the primary: a lagging replica could hand back a
	// key just revoked, and caching it would outlast the contract's 1 s.
	// Data reads fall back (Redis down) to the replica, and to the primary
	// while it is down, through pools of their own, as small as the
	// fallbacks the reader lets run at once: the requests' pool (keys,
	// usage) never waits behind them.
	readerCfg := cache.DefaultReaderConfig()
	fbPrimary, closeFB, err := openPoolSized("MD_DATABASE_URL", cfg.DatabaseURL, int32(readerCfg.Fallbacks))
	if err != nil {
		return err
	}
	defer closeFB()
	var fallback cache.Store = fbPrimary
	// Candles are read from Postgres on every miss of node memory, not as
	// a fallback: through the requests' pools (the replica's, the
	// primary's while it is down), not the fallbacks' small ones.
	var candles api.Candles = primary
	stores := []*store.Store{primary}
	var replica *store.Store
	if cfg.DatabaseReadURL != cfg.DatabaseURL {
		var closeReplica, closeFBReplica func()
		replica, closeReplica, err = openPool("MD_DATABASE_READ_URL", cfg.DatabaseReadURL)
		if err != nil {
			return err
		}
		defer closeReplica()
		fbReplica, closeFBReplica, err := openPoolSized("MD_DATABASE_READ_URL", cfg.DatabaseReadURL, int32(readerCfg.Fallbacks))
		if err != nil {
			return err
		}
		defer closeFBReplica()
		rr := replicaReads(fbReplica, fbPrimary, reg, log)
		fallback = rr
		candles = &store.ReplicaReads{Replica: replica, Primary: primary, Backoff: rr.Backoff, OnFallback: rr.OnFallback}
		stores = append(stores, replica)
	}
	fatal := make(chan error, 1)
	schema := watchSchema(ctx, stores, log, fatal)
	select {
	case err := <-fatal:
		return err
	default:
	}
	rdb, nc, err := openCaches(cfg, "marketdata api", log)
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer nc.Close()
	if err := observeRedis(rdb, reg, log); err != nil {
		return err
	}

	id := make([]byte, 6)
	rand.Read(id) // crypto/rand.Read never fails
	presence, err := ratelimit.NewPresence(nc, notice.PresenceSubject, hex.EncodeToString(id), ratelimit.PresenceInterval)
	if err != nil {
		return err
	}
	go func() {
		if err := presence.Run(ctx); err != nil {
			log.Error("api presence not announced; the Redis-outage fallback counts this node alone", "err", err)
		}
	}()
	// The limiter waits for a slow Redis as a read does (1 s,
	// ratelimit.DefaultSlowWait): deciding alone then would loosen the
	// limits on a merely busy machine. Once a call got no answer within
	// that, Redis counts as down and the node decides on its share at once
	// (limiter.Run probes Redis every 100 ms) until every master answers.
	limiter, err := ratelimit.New(rdb, ratelimit.Config{
		Limit: cfg.RateLimit, Window: cfg.RateWindow,
		AuthFailLimit: cfg.AuthFailLimit, AuthFailWindow: cfg.AuthFailWindow,
		Prefix: cfg.RedisPrefix, Timeout: ratelimit.DefaultTimeout, SlowWait: ratelimit.DefaultSlowWait,
	}, presence.Count, time.Now)
	if err != nil {
		return err
	}
	if err := limiter.Register(reg); err != nil {
		return err
	}
	go limiter.Run(ctx)
	slotsCfg := ratelimit.DefaultStreamsConfig()
	slotsCfg.Prefix = cfg.RedisPrefix
	slots, err := ratelimit.NewStreams(rdb, slotsCfg, presence.Count)
	if err != nil {
		return err
	}
	slots.FollowHealth(limiter) // one view of Redis: slow is not down
	if err := slots.Register(reg); err != nil {
		return err
	}
	go slots.Run(ctx)
	reader, err := cache.NewReader(newCache(rdb, cfg), fallback, readerCfg, cache.ReaderDeps{
		Log: log,
		Publish: func(n notice.Change) error {
			return notice.Publish(nc, noticeSubject, n.EncodeWithin(nc.MaxPayload()))
		},
	})
	if err != nil {
		return err
	}
	defer reader.Close()
	ac := api.DefaultConfig()
	ac.DocsOrigin, ac.AppOrigins, ac.TrustedProxies = cfg.DocsOrigin, cfg.AppOrigins, cfg.TrustedProxies
	ac.AuthFailExempt = cfg.AuthFailExempt
	ac.KeyPepper, ac.CursorSecret = cfg.KeyPepper, cfg.CursorSecret
	ac.NoticeSubject, ac.MaxConns, ac.KeyStaleMax = noticeSubject, cfg.MaxConns, cfg.KeyStaleMax
	ac.CountUsage = !cfg.NoUsage
	// Usage is counted into and read from the primary: the counts are
	// added there, and /account/usage must see them within 5 s.
	srv, err := api.New(ac, api.Deps{
		Credentials: primary, Reader: reader, Usage: primary, Candles: candles,
		Limiter: limiter, StreamSlots: slots, NC: nc, Log: log, Registry: reg,
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	edge.WarnFileLimit(log, cfg.MaxConns)
	ln, err := listen(b.http, "MD_HTTP_ADDR", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	adminLn, err := listen(b.admin, "MD_ADMIN_ADDR", cfg.AdminAddr)
	if err != nil {
		ln.Close()
		return err
	}
	admin, err := startAdminOn(adminLn, reg, apiChecks(srv, schema, primary, replica, rdb, nc), log)
	if err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("api listening", "addr", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr().String(), admin.Addr())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-fatal:
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	// Stop accepting, drain in-flight requests, then the admin server.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	admin.Close(sctx) //nolint:errcheck // stopping: a slow probe cut off is not an error of the node
	log.Info("api stopped")
	if runErr != nil {
		return runErr
	}
	return err
}

// apiChecks is the API node's /readyz. "An API node is ready while it can
// answer correctly": the node's own state is required (schema checked,
// search index loaded), and so is being able to read data at all (Redis or
// Postgres). Each dependency alone is degradable: every node shares it, and
// draining every node at once for it would turn a partial outage into a
// total one while the nodes still answer correctly — Redis down: reads from
// Postgres, limits by the node's share; the primary down: keys from memory
// (MD_KEY_STALE_MAX), reads from Redis and the replica; the replica down:
// reads from the primary; NATS down: the safety nets (key poll, 2 s price
// bound, search resync) replace the notices.
func apiChecks(srv *api.Server, schema *schemaGate, primary, replica *store.Store, rdb redis.UniversalClient, nc *nats.Conn) []check {
	redisUp := redisCheck(rdb)
	checks := []check{
		required("schema", schema.check),
		required("search_index", func(context.Context) error { return srv.Ready() }),
		required("data", func(ctx context.Context) error {
			// Asked at once: a Redis that hangs must not leave Postgres
			// no time to answer.
			pg := make(chan error, 1)
			go func() {
				err := primary.Ping(ctx)
				if err != nil && replica != nil && replica.Ping(ctx) == nil {
					err = nil
				}
				pg <- err
			}()
			rerr := redisUp(ctx)
			perr := <-pg
			var partial *partialError
			if rerr == nil || errors.As(rerr, &partial) || perr == nil {
				return nil
			}
			return fmt.Errorf("neither redis (%v) nor postgres (%v) answers", rerr, perr)
		}),
		degradable("redis", redisUp),
		degradable("postgres", primary.Ping),
		degradable("nats", natsCheck(nc)),
	}
	if replica != nil {
		checks = append(checks, degradable("postgres_replica", replica.Ping))
	}
	return checks
}

// replicaReads sends data reads to the replica and to the primary while
// the replica cannot be reached, counting those reads and logging the
// switch at most every 30 s.
func replicaReads(replica, primary *store.Store, reg prometheus.Registerer, log *slog.Logger) *store.ReplicaReads {
	fell := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketdata_api_replica_fallback_reads_total",
		Help: "Data reads the primary answered because the read replica could not be reached.",
	})
	reg.MustRegister(fell)
	warn := &ratelog.Limiter{Every: 30 * time.Second}
	return &store.ReplicaReads{
		Replica: replica, Primary: primary, Backoff: store.DefaultReplicaBackoff,
		OnFallback: func(err error) {
			fell.Inc()
			if err != nil {
				warn.Log(context.Background(), log, slog.LevelWarn, "read replica unreachable; reading from the primary", "err", err)
			}
		},
	}
}
