package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis starts a redis-server of the test's own (StartRedis) and
// returns a client and its address. Tests that flush scripts or data
// (SCRIPT FLUSH, FLUSHALL) use it instead of the shared Redis, where they
// would break other packages' tests running at the same time (and those
// theirs).
func PrivateRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	Integration(t, "redis-server")
	srv := StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb, srv.Addr
}
