package world

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/bench/measure"
)

// Postgres CPU is attributed per backend: the backends serving the
// benchmark's own connections (pg_stat_activity rows of the sandbox's
// databases), each read from /proc/<pid>/stat, grouped by the
// application_name the benchmark gives each child's connections. Every
// other postgres process on the machine (other people's tests, the
// checkpointer, autovacuum) is left out.

// pgAppPrefix starts the application_name of the children's connections:
// "mdbench-ingest" is grouped as "ingest".
const pgAppPrefix = "mdbench-"

// pgSampleEvery is how often the monitor looks for backends; a backend that
// exits loses the CPU it spent since its last sample.
const pgSampleEvery = 200 * time.Millisecond

// WithAppName returns dsn with application_name set to the group's name,
// so that the monitor can tell whose backend a connection is.
func WithAppName(dsn, group string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn // the child reports the bad URL itself
	}
	q := u.Query()
	q.Set("application_name", pgAppPrefix+group)
	u.RawQuery = q.Encode()
	return u.String()
}

// pgGroup is the group of a backend by its application_name.
func pgGroup(app string) string {
	if g, ok := strings.CutPrefix(app, pgAppPrefix); ok && g != "" {
		return g
	}
	return "other"
}

// pgKey names a backend: a pid is reused, its start time with it is not.
type pgKey struct {
	PID   int
	Start time.Time
}

// pgBackend is what the monitor knows of one backend.
type pgBackend struct {
	group string
	ticks int64 // utime + stime at its last sample
	gone  bool  // no longer in pg_stat_activity: ticks are its last
}

// PGMark is the state of the sandbox's backends at one moment.
type PGMark struct {
	at       time.Time
	ticks    map[pgKey]int64
	gone     map[pgKey]bool
	groups   map[pgKey]string
	sessions int64 // pg_stat_database.sessions of the sandbox's databases
}

// PGCPU is the Postgres CPU the benchmark's backends spent between two
// marks, by group (the child the connection belongs to: "ingest", "api-a",
// …; "other" for connections without a benchmark application_name, such as
// mdbench's own loading).
type PGCPU struct {
	Seconds map[string]float64 `json:"cpu_seconds"`
	Cores   map[string]float64 `json:"cores"`
	// Backends were alive at some point between the marks; Started and
	// Ended of them began or ended in between.
	Backends int `json:"backends"`
	Started  int `json:"backends_started"`
	Ended    int `json:"backends_ended"`
	// Sessions are the sessions pg_stat_database counted as established
	// in between; Unsampled those the monitor never saw (they came and
	// went between two samples: their CPU is missing from Seconds).
	Sessions  int64 `json:"sessions"`
	Unsampled int64 `json:"sessions_never_sampled"`
}

// attributePG is the CPU each group's backends spent from before to after.
// A backend first seen after before started after it (before is taken with a
// fresh sample), so it counts from zero; one that ended counts to its last
// sample.
func attributePG(before, after PGMark) PGCPU {
	c := PGCPU{Seconds: map[string]float64{}, Cores: map[string]float64{}}
	for k, t := range after.ticks {
		base, existed := before.ticks[k]
		if existed && before.gone[k] {
			continue // ended before the interval
		}
		c.Backends++
		if !existed {
			c.Started++
		}
		if after.gone[k] {
			c.Ended++
		}
		if d := t - base; d > 0 {
			c.Seconds[after.groups[k]] += float64(d) / measure.ClockTicks
		}
	}
	if d := after.sessions - before.sessions; d > 0 {
		c.Sessions = d
		c.Unsampled = max(0, d-int64(c.Started))
	}
	wall := after.at.Sub(before.at).Seconds()
	for g, s := range c.Seconds {
		c.Seconds[g] = measure.Round2(s)
		if wall > 0 {
			c.Cores[g] = measure.Round2(s / wall)
		}
	}
	return c
}

// PGMonitor samples the sandbox's backends until Stop.
type PGMonitor struct {
	conn   *pgx.Conn
	prefix string
	log    *slog.Logger

	mu       sync.Mutex
	backends map[pgKey]*pgBackend
	lastErr  error
	stop     chan struct{}
	done     chan struct{}
}

// StartPGMonitor follows the backends of the databases named "<id>_…" over
// a connection of its own to the maintenance database (which it does not
// count).
func StartPGMonitor(ctx context.Context, pgURL string, sb *Sandbox, log *slog.Logger) (*PGMonitor, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("postgres monitor: %w", err)
	}
	m := &PGMonitor{conn: conn, prefix: sb.ID + "_", log: log, backends: map[pgKey]*pgBackend{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := m.sample(ctx); err != nil {
		conn.Close(ctx) // the sample error is the one to report
		return nil, err
	}
	go m.loop()
	return m, nil
}

func (m *PGMonitor) loop() {
	defer close(m.done)
	t := time.NewTicker(pgSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.sample(ctx); err != nil {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
		}
		cancel()
	}
}

// sample reads the backends of the sandbox's databases and their CPU.
func (m *PGMonitor) sample(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows, err := m.conn.Query(ctx, `
		SELECT pid, backend_start, coalesce(application_name, '')
		FROM pg_stat_activity
		WHERE starts_with(datname, $1)
		  AND backend_type = 'client backend'`, m.prefix)
	if err != nil {
		return fmt.Errorf("postgres monitor: pg_stat_activity: %w", err)
	}
	alive := map[pgKey]bool{}
	for rows.Next() {
		var k pgKey
		var app string
		if err := rows.Scan(&k.PID, &k.Start, &app); err != nil {
			rows.Close()
			return fmt.Errorf("postgres monitor: pg_stat_activity: %w", err)
		}
		alive[k] = true
		b := m.backends[k]
		if b == nil {
			b = &pgBackend{group: pgGroup(app)}
			m.backends[k] = b
		}
		if raw, err := os.ReadFile("/proc/" + strconv.Itoa(k.PID) + "/stat"); err == nil {
			if _, t, err := measure.ParseStatTicks(raw); err == nil {
				b.ticks = max(b.ticks, t)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres monitor: pg_stat_activity: %w", err)
	}
	for k, b := range m.backends {
		if !alive[k] {
			b.gone = true
		}
	}
	return nil
}

// Mark samples now and returns the state, the start or end of a phase.
func (m *PGMonitor) Mark(ctx context.Context) PGMark {
	if err := m.sample(ctx); err != nil {
		m.log.Warn("postgres monitor", "err", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The connection is the sampler's too: one query at a time.
	var sessions int64
	if err := m.conn.QueryRow(ctx, `
		SELECT coalesce(sum(sessions), 0)::bigint
		FROM pg_stat_database
		WHERE starts_with(datname, $1)`, m.prefix).Scan(&sessions); err != nil {
		m.log.Warn("postgres monitor: pg_stat_database", "err", err)
	}
	mk := PGMark{at: time.Now(), ticks: make(map[pgKey]int64, len(m.backends)), gone: map[pgKey]bool{},
		groups: make(map[pgKey]string, len(m.backends)), sessions: sessions}
	for k, b := range m.backends {
		mk.ticks[k], mk.groups[k] = b.ticks, b.group
		if b.gone {
			mk.gone[k] = true
		}
	}
	return mk
}

// Stop ends the sampling and closes the connection.
func (m *PGMonitor) Stop() {
	if m == nil {
		return
	}
	close(m.stop)
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.conn.Close(ctx) // the monitor's figures are taken
	if m.lastErr != nil {
		m.log.Warn("postgres monitor: a sample failed", "err", m.lastErr)
	}
}

// PGPhase is a phase's start on a monitor that may be absent.
type PGPhase struct {
	m     *PGMonitor
	start PGMark
}

// PGStart marks a phase's start (nothing without a monitor).
func PGStart(ctx context.Context, m *PGMonitor) PGPhase {
	if m == nil {
		return PGPhase{}
	}
	return PGPhase{m: m, start: m.Mark(ctx)}
}

// End is the CPU since the start, nil without a monitor.
func (p PGPhase) End(ctx context.Context) *PGCPU {
	if p.m == nil {
		return nil
	}
	c := attributePG(p.start, p.m.Mark(ctx))
	return &c
}

// String shows the CPU by group, largest first, and the backends.
func (c *PGCPU) String() string {
	if c == nil {
		return "n/a"
	}
	s := strings.TrimPrefix(measure.Cores(c.Cores), "cores: ")
	return fmt.Sprintf("%s cores (%d backends, %d started, %d ended, %d sessions never sampled)",
		s, c.Backends, c.Started, c.Ended, c.Unsampled)
}
