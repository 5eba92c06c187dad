package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisLog hands go-redis's own log lines (connection pool and cluster
// notices), which it would write as plain text on stderr, to a slog logger
// at WARN, one record each. A line repeats per request while Redis is down,
// so each kind of line (its format) goes out at most once per 10 s, with
// the count held back.
type redisLog struct {
	log    *slog.Logger
	limits sync.Map // format → *Limiter
}

// Printf implements go-redis's internal.Logging.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	lim, _ := l.limits.LoadOrStore(format, &Limiter{})
	text := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	lim.(*Limiter).Log(ctx, l.log, slog.LevelWarn, "redis client", "detail", text)
}

// InstallRedisLog makes log go-redis's logger for the whole process.
func InstallRedisLog(log *slog.Logger) {
	redis.SetLogger(&redisLog{log: log})
}
