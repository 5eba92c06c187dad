package world

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// Sandbox is one benchmark run's own slice of the shared services: databases,
// a Redis key prefix and NATS stream and subject names, all removed by Close.
// Other people's tests run against the same servers, so nothing outside the
// sandbox is touched.
type Sandbox struct {
	// ID is the run's unique lower-case name ("mdbench<hex>").
	ID string
	// Prefix is the Redis key prefix ("<id>:").
	Prefix string
	// Ingest names the streams, subjects and consumer of the run.
	Ingest ingest.Config

	RDB *redis.Client
	NC  *nats.Conn
	JS  jetstream.JetStream

	// PG attributes Postgres CPU to the run's own backends once
	// MonitorPostgres started it (nil before).
	PG *PGMonitor

	pgURL string
	dbs   []string
	log   *slog.Logger
}

// MonitorPostgres starts following the backends of the sandbox's databases.
func (s *Sandbox) MonitorPostgres(ctx context.Context) error {
	if s.PG != nil {
		return nil
	}
	m, err := StartPGMonitor(ctx, s.pgURL, s, s.log)
	if err != nil {
		return err
	}
	s.PG = m
	return nil
}

// NewSandbox connects to the three services and names the run's resources.
func NewSandbox(ctx context.Context, o *Options, log *slog.Logger) (*Sandbox, error) {
	id := testenv.Name("mdbench")
	up := strings.ToUpper(id)
	s := &Sandbox{ID: id, Prefix: id + ":", pgURL: o.PostgresURL, log: log, Ingest: ingest.DefaultConfig()}
	s.Ingest.Stream, s.Ingest.SubjectPrefix = "MD_"+up, id+"."+ingest.DefaultSubjectPrefix
	s.Ingest.DLQStream, s.Ingest.DLQPrefix = "MD_DLQ_"+up, id+"."+ingest.DefaultDLQPrefix
	s.Ingest.NoticeSubject = id + "." + notice.ChangeSubject
	conn, err := pgx.Connect(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", o.PostgresURL, err)
	}
	conn.Close(ctx)
	opt, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	s.RDB = redis.NewClient(opt)
	if err := s.RDB.Ping(ctx).Err(); err != nil {
		s.RDB.Close()
		return nil, fmt.Errorf("redis %s: %w", o.RedisURL, err)
	}
	s.NC, err = nats.Connect(o.NATSURL, nats.Name("mdbench "+id), nats.Timeout(3*time.Second))
	if err != nil {
		s.RDB.Close()
		return nil, fmt.Errorf("nats %s: %w", o.NATSURL, err)
	}
	if s.JS, err = jetstream.New(s.NC); err != nil {
		s.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	log.Info("sandbox", "id", id, "stream", s.Ingest.Stream, "subjects", s.Ingest.SubjectPrefix+".>", "redis_prefix", s.Prefix)
	return s, nil
}

// Database creates and migrates a fresh database "<id>_<suffix>" and returns
// its URL. Close drops it.
func (s *Sandbox) Database(ctx context.Context, suffix string) (string, error) {
	name := s.ID + "_" + suffix
	u, err := url.Parse(s.pgURL)
	if err != nil {
		return "", fmt.Errorf("postgres url: %w", err)
	}
	u.Path = "/" + name
	dsn := u.String()
	s.dbs = append(s.dbs, name) // before Migrate, which may create it and then fail
	if _, err := store.Migrate(ctx, dsn); err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	return dsn, nil
}

// Close removes everything the sandbox created and closes its connections.
// It runs with its own deadline: the run's context may be over by then.
func (s *Sandbox) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	s.PG.Stop()
	if s.JS != nil {
		for _, name := range []string{s.Ingest.Stream, s.Ingest.DLQStream} {
			if err := s.JS.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				errs = append(errs, fmt.Errorf("delete stream %s: %w", name, err))
			}
		}
	}
	if s.NC != nil {
		s.NC.Close()
	}
	if s.RDB != nil {
		n, err := s.deleteKeys(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		s.log.Info("sandbox redis keys deleted", "keys", n)
		s.RDB.Close()
	}
	if len(s.dbs) > 0 {
		if conn, err := pgx.Connect(ctx, s.pgURL); err != nil {
			errs = append(errs, fmt.Errorf("connect to drop databases: %w", err))
		} else {
			for _, name := range s.dbs {
				if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
					errs = append(errs, fmt.Errorf("drop database %s: %w", name, err))
				}
			}
			conn.Close(ctx)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("sandbox cleanup incomplete", "err", err)
		return
	}
	s.log.Info("sandbox removed", "id", s.ID, "databases", len(s.dbs))
}

func (s *Sandbox) deleteKeys(ctx context.Context) (int, error) {
	iter := s.RDB.Scan(ctx, 0, s.Prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("scan redis keys %s*: %w", s.Prefix, err)
	}
	for i := 0; i < len(keys); i += 500 {
		if err := s.RDB.Unlink(ctx, keys[i:min(i+500, len(keys))]...).Err(); err != nil {
			return i, fmt.Errorf("unlink redis keys: %w", err)
		}
	}
	return len(keys), nil
}

// Drained waits until the run's consumer exists and has nothing pending or
// unacknowledged, checking every 100 ms; alive reports a dead child early.
func (s *Sandbox) Drained(ctx context.Context, timeout time.Duration, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last string
	for {
		if err := alive(); err != nil {
			return err
		}
		cons, err := s.JS.Consumer(ctx, s.Ingest.Stream, s.Ingest.Consumer)
		if err == nil {
			info, ierr := cons.Info(ctx)
			if ierr == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
			if ierr == nil {
				last = fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
			} else {
				err = ierr
			}
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer %s not drained within %s (%s)", s.Ingest.Consumer, timeout, last)
		case <-t.C:
		}
	}
}

// Open makes a benchmark's sandbox with one migrated database,
// "<id>_<suffix>", and returns both; the caller closes the sandbox.
func Open(ctx context.Context, o *Options, log *slog.Logger, suffix string) (*Sandbox, string, error) {
	sb, err := NewSandbox(ctx, o, log)
	if err != nil {
		return nil, "", err
	}
	dsn, err := sb.Database(ctx, suffix)
	if err != nil {
		sb.Close()
		return nil, "", err
	}
	return sb, dsn, nil
}
