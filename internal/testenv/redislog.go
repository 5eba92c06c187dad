package testenv

import (
	"log/slog"
	"os"

	"github.com/marketdata/marketdata/internal/ratelog"
)

// go-redis logs a line per failed dial of every pooled connection: a test
// that kills or stops a Redis server of its own would fill its package's
// output with thousands of them (a CI log was mostly that). Test binaries
// that import testenv write each kind of go-redis line at most once per
// 10 s, as the binary does (cmd/marketdata installs its own logger the same
// way).
func init() {
	ratelog.InstallRedisLog(slog.New(slog.NewTextHandler(os.Stderr, nil)))
}
