package testenv

import (
	"testing"
)

// TestShortSkipsEveryService: under -short each helper that needs a service
// skips the test before it dials or starts anything, even with CI=true (which
// turns a missing service into a failure). The addresses point at a closed
// port and PATH is empty, so a helper that went on would fail the subtest
// (CI=true) or start a server and return: either way the subtest would not
// be skipped.
func TestShortSkipsEveryService(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks what -short does; `make test-short` runs it")
	}
	dead := ClosedPort(t)
	for _, v := range []*string{&PostgresURL, &RedisURL, &NATSURL} {
		old := *v
		t.Cleanup(func() { *v = old })
	}
	PostgresURL = "postgres://postgres@" + dead + "/postgres?sslmode=disable&connect_timeout=1"
	RedisURL = "redis://" + dead + "/0"
	NATSURL = "nats://" + dead
	t.Setenv("CI", "true")
	t.Setenv("PATH", "")
	t.Setenv("MD_TEST_PG_BIN", t.TempDir())

	helpers := map[string]func(testing.TB){
		"Database":          func(t testing.TB) { Database(t) },
		"Redis":             func(t testing.TB) { Redis(t) },
		"NATS":              func(t testing.TB) { NATS(t) },
		"StartRedis":        func(t testing.TB) { StartRedis(t) },
		"PrivateRedis":      func(t testing.TB) { PrivateRedis(t) },
		"StartNATS":         func(t testing.TB) { StartNATS(t) },
		"StartPostgres":     func(t testing.TB) { StartPostgres(t) },
		"StartRedisCluster": func(t testing.TB) { StartRedisCluster(t) },
	}
	for name, helper := range helpers {
		var sub *testing.T
		t.Run(name, func(t *testing.T) {
			sub = t
			helper(t)
			t.Errorf("%s returned under -short: want the test skipped before it needs a service", name)
		})
		if !sub.Skipped() {
			t.Errorf("%s: the test was not skipped under -short", name)
		}
	}
}
