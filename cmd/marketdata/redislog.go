package main

import (
	"log/slog"

	"github.com/marketdata/marketdata/internal/ratelog"
)

// installRedisLog makes log go-redis's logger for the whole process: its
// plain-text lines become JSON WARN records, each kind at most once per
// 10 s (ratelog.InstallRedisLog).
func installRedisLog(log *slog.Logger) { ratelog.InstallRedisLog(log) }
