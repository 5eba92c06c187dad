package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestRedisLogsAsJSON: after the process's logger is set up, a line go-redis
// logs itself (a failed dial) comes out as one JSON WARN record through our
// logger, not as plain text; repeats are held back.
func TestRedisLogsAsJSON(t *testing.T) {
	var stderr testenv.LogBuffer
	c := &cli{stderr: &stderr, logFormat: "json", logLevel: "info"}
	if _, err := c.logger(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens: every dial fails
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	for range 5 {
		if err := rdb.Ping(context.Background()).Err(); err == nil {
			t.Fatal("ping to a closed port succeeded")
		}
	}
	var dials int
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		if rec["msg"] != "redis client" {
			continue
		}
		detail, _ := rec["detail"].(string)
		if rec["level"] != "WARN" || strings.HasPrefix(detail, "redis: ") {
			t.Errorf("go-redis record: got %v, want level WARN and the detail without its \"redis: \" prefix", rec)
		}
		if strings.Contains(detail, "failed to dial") {
			dials++
		}
	}
	if dials != 1 {
		t.Errorf("failed-dial records for 5 failed pings: got %d, want 1 (repeats held back)\n%s", dials, stderr.String())
	}
}
