package main

import (
	"strings"
	"testing"
)

// TestLoadConfigRedisURL: MD_REDIS_URL takes one server's URL, a cluster URL
// with addr= parameters (AUTH and TLS included), or cluster addresses; a bad
// one is refused without quoting its password.
func TestLoadConfigRedisURL(t *testing.T) {
	good := []string{
		"redis://127.0.0.1:6379/0",
		"rediss://user:pw@redis.example:6380/2",
		"redis://user:pass@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002",
		"rediss://:pass@10.0.0.1:7000?addr=10.0.0.2:7000&dial_timeout=2s",
		"127.0.0.1:7000,127.0.0.1:7001, 127.0.0.1:7002",
	}
	for _, v := range good {
		if _, err := LoadConfig(envOf(map[string]string{"MD_REDIS_URL": v}), secretsUnused); err != nil {
			t.Errorf("%s: got %v, want accepted", v, err)
		}
	}
	bad := []string{
		"redis://u:hunter2@127.0.0.1:6379/notadb",
		"redis://u:hunter2@127.0.0.1:6379/0?bogus=1",
		"redis://u:hunter2@127.0.0.1:7000?addr=127.0.0.1:7001&bogus=1",
		"redis://u:hunter2@127.0.0.1:%zz/0",
		"127.0.0.1:7000,nohost",
	}
	for _, v := range bad {
		_, err := LoadConfig(envOf(map[string]string{"MD_REDIS_URL": v}), secretsUnused)
		if err == nil || !strings.HasPrefix(err.Error(), "MD_REDIS_URL: ") {
			t.Errorf("%s: got %v, want an MD_REDIS_URL error", v, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error quotes the password: %v", v, err)
		}
	}
}
