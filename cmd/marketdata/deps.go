package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// connectNATS connects with endless reconnects; the client's asynchronous
// errors (a slow consumer, a permission refused) go to log.
func connectNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats error", "err", err)
		}),
	)
	if err != nil {
		return nil, &configError{"MD_NATS_URL", "cannot connect: " + err.Error()}
	}
	return nc, nil
}

// openStore connects to the database of dsn (named by its variable, name,
// in errors) and checks that its schema is this binary's. close releases it.
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

func connectRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	rdb, err := cache.Connect(ctx, url)
	if err != nil {
		return nil, &configError{"MD_REDIS_URL", err.Error()}
	}
	return rdb, nil
}

func newCache(rdb redis.UniversalClient, cfg *Config) *cache.Cache {
	return cache.New(rdb, cfg.RedisPrefix, cache.Rules{Retention: cfg.ResolvedRetention, Now: time.Now})
}

// defaultNoticeSubject is where ingest publishes change notices unless told
// otherwise; api and cache rebuild take the same flag.
var defaultNoticeSubject = ingest.Config{}.Defaults().NoticeSubject

// ingestFlags are the stream names and sizes; the defaults are the contract's.
func ingestFlags(fs *pflag.FlagSet, ic *ingest.Config) {
	fs.StringVar(&ic.Stream, "stream", "MARKETDATA", "JetStream stream of matcher updates")
	fs.StringVar(&ic.SubjectPrefix, "subject-prefix", "md.v1", "subject prefix of matcher updates")
	fs.StringVar(&ic.DLQStream, "dlq-stream", "MARKETDATA_DLQ", "stream that keeps rejected messages")
	fs.StringVar(&ic.DLQPrefix, "dlq-prefix", "md.dlq.v1", "subject prefix of rejected messages")
	fs.StringVar(&ic.NoticeSubject, "notice-subject", defaultNoticeSubject, "subject of change notices")
	fs.StringVar(&ic.Consumer, "consumer", "ingest", "durable consumer shared by all ingest workers")
	replicasFlag(fs, ic)
	fs.IntVar(&ic.BatchSize, "batch-size", 1000, "most messages per batch")
	fs.DurationVar(&ic.Linger, "linger", 10*time.Millisecond, "how long a batch may wait for more messages after its first")
	fs.IntVar(&ic.Appliers, "appliers", 4, "batches one process writes at once")
	fs.DurationVar(&ic.AckWait, "ack-wait", 30*time.Second, "redeliver a message not acknowledged this long after delivery (a crashed worker's messages)")
}

// replicasFlag registers --replicas of `ingest` and `feed`.
func replicasFlag(fs *pflag.FlagSet, ic *ingest.Config) {
	fs.IntVar(&ic.Replicas, "replicas", 1, "replicas of the streams this command creates, or raises on a NATS cluster when fewer (overrides MD_STREAM_REPLICAS; 3 on a NATS cluster)")
}

// applyReplicas takes MD_STREAM_REPLICAS unless --replicas was given: flags
// override the environment.
func applyReplicas(fs *pflag.FlagSet, cfg *Config, ic *ingest.Config) {
	if !fs.Changed("replicas") {
		ic.Replicas = cfg.StreamReplicas
	}
}

// validateReplicas checks --replicas (MD_STREAM_REPLICAS is checked by
// LoadConfig).
func validateReplicas(ic *ingest.Config) error {
	if ic.Replicas < 1 || ic.Replicas > 5 {
		return fmt.Errorf("--replicas: %d is not within 1..5 (JetStream's limit)", ic.Replicas)
	}
	return nil
}

func validateIngest(ic *ingest.Config) error {
	if ic.BatchSize < 1 || ic.BatchSize > 10000 {
		return fmt.Errorf("--batch-size: %d is not within 1..10000", ic.BatchSize)
	}
	if ic.Linger < 0 || ic.Linger > time.Second {
		return fmt.Errorf("--linger: %s is not within 0..1s", ic.Linger)
	}
	if ic.Appliers < 1 || ic.Appliers > 64 {
		return fmt.Errorf("--appliers: %d is not within 1..64", ic.Appliers)
	}
	if ic.AckWait < time.Second {
		return fmt.Errorf("--ack-wait: %s is below 1s", ic.AckWait)
	}
	return validateReplicas(ic)
}

// connectCaches opens Redis and NATS for a long-running process; close both
// when done (also on error: what was opened is returned).
func connectCaches(ctx context.Context, cfg *Config, name string, log *slog.Logger) (redis.UniversalClient, *nats.Conn, error) {
	rdb, err := connectRedis(ctx, cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	nc, err := connectNATS(cfg.NATSURL, name, log)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, nc, nil
}

// readiness is what /readyz checks: every dependency answers.
func readiness(st *store.Store, rdb redis.UniversalClient, nc *nats.Conn) []check {
	return []check{
		{"postgres", st.Ping},
		{"redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		{"nats", func(context.Context) error { return natsStatus(nc) }},
	}
}
