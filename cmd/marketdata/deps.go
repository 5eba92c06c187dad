package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/store"
)

// connectNATS connects with endless reconnects for a command that needs
// NATS now (it fails when NATS does not answer); see natsOptions.
func connectNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url, natsOptions(name, log)...)
	if err != nil {
		return nil, &configError{"MD_NATS_URL", "cannot connect: " + err.Error()}
	}
	return nc, nil
}

// openNATS is connectNATS for a long-running process: when NATS does not
// answer at start, the connection keeps trying in the background (what is
// subscribed meanwhile is subscribed once it connects), so the process
// starts unready instead of exiting.
func openNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append(natsOptions(name, log), nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, &configError{"MD_NATS_URL", "cannot connect: " + err.Error()}
	}
	if !nc.IsConnected() {
		log.Warn("nats does not answer yet; connecting in the background")
	}
	return nc, nil
}

// natsOptions: endless reconnects; the client's asynchronous errors (a slow
// consumer, a permission refused) and every disconnect, reconnect and close
// go to log, once per event. The API chains its own reconnect and error
// handlers after these.
func natsOptions(name string, log *slog.Logger) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats error", "err", err)
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info("nats connected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closing on purpose: ClosedHandler says so
			}
			if err != nil {
				log.Warn("nats disconnected; reconnecting", "err", err)
				return
			}
			log.Warn("nats disconnected; reconnecting")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("nats connection closed")
		}),
	}
}

// openStore connects to the database of dsn (named by its variable, name,
// in errors) and checks that its schema is this binary's. close releases it.
// It is for commands that need the database now; long-running processes
// use openPool and watchSchema.
func openStore(ctx context.Context, name, dsn string) (st *store.Store, close func(), err error) {
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, &configError{name, err.Error()}
	}
	st = store.New(pool)
	if err := st.CheckSchema(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, pool.Close, nil
}

// openPool opens a store on dsn without dialling (see store.Open).
func openPool(name, dsn string) (*store.Store, func(), error) { return openPoolSized(name, dsn, 0) }

// openPoolSized is openPool with at most maxConns connections.
func openPoolSized(name, dsn string, maxConns int32) (*store.Store, func(), error) {
	pool, err := store.OpenSized(dsn, maxConns)
	if err != nil {
		return nil, nil, &configError{name, err.Error()}
	}
	return store.New(pool), pool.Close, nil
}

// connectRedis opens Redis for a command that needs it now: it fails when
// Redis does not answer.
func connectRedis(ctx context.Context, o redisx.Options) (redis.UniversalClient, error) {
	rdb, err := redisx.Connect(ctx, o)
	if err != nil {
		return nil, &configError{"MD_REDIS_URL", err.Error()}
	}
	return rdb, nil
}

func newCache(rdb redis.UniversalClient, cfg *Config) *cache.Cache {
	return cache.New(rdb, cfg.RedisPrefix, cache.Rules{Retention: cfg.ResolvedRetention, Now: time.Now})
}

// openCaches opens Redis and NATS for a long-running process without
// waiting for either to answer; close both when done.
func openCaches(cfg *Config, name string, log *slog.Logger) (redis.UniversalClient, *nats.Conn, error) {
	rdb := cfg.Redis.Open()
	nc, err := openNATS(cfg.NATSURL, name, log)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, nc, nil
}

// observeRedis gives a Redis Cluster client the process's logger (it logs
// topology changes) and registers marketdata_redis_nodes_down.
func observeRedis(rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) error {
	if cl, ok := rdb.(*redisx.Cluster); ok {
		cl.SetLogger(log)
	}
	return redisx.RegisterMetrics(reg, rdb)
}

// redisCheck is the readiness probe of Redis (redisx.Health): an error when
// the node cannot use Redis at all; on a Redis Cluster, nodes it routes
// around (a dead replica, a dead master whose slots moved) are reported as
// degraded, sorted by address.
func redisCheck(rdb redis.UniversalClient) func(context.Context) error {
	return func(ctx context.Context) error {
		down, err := redisx.Health(ctx, rdb)
		if err != nil {
			return err
		}
		if len(down) == 0 {
			return nil
		}
		parts := make([]string, 0, len(down))
		for node, why := range down {
			parts = append(parts, node+": "+why)
		}
		slices.Sort(parts)
		return &partialError{strings.Join(parts, "; ")}
	}
}

func natsCheck(nc *nats.Conn) func(context.Context) error {
	return func(context.Context) error { return natsStatus(nc) }
}
