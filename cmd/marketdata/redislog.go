package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/ratelog"
)

// redisLog hands go-redis's own log lines (connection pool and cluster
// notices), which it would write as plain text on stderr, to the process's
// slog logger at WARN, one JSON line each. A line repeats per request while
// Redis is down, so each kind of line (its format) goes out at most once per
// 10 s, with the count held back.
type redisLog struct {
	log    *slog.Logger
	limits sync.Map // format → *ratelog.Limiter
}

// Printf implements go-redis's internal.Logging.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	lim, _ := l.limits.LoadOrStore(format, &ratelog.Limiter{})
	text := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	lim.(*ratelog.Limiter).Log(ctx, l.log, slog.LevelWarn, "redis client", "detail", text)
}

// installRedisLog makes log go-redis's logger for the whole process.
func installRedisLog(log *slog.Logger) {
	redis.SetLogger(&redisLog{log: log})
}
