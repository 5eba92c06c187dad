package api_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// TestRedisOutageWarnsRarely: with Redis unreachable every request is
// decided by the node alone, but the two "decided by this node alone" WARNs
// come at most once per 10 s each (the first at once), not once per request.
func TestRedisOutageWarnsRarely(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withRedis(unreachableRedis(t)), withLimit(1000), withWindow(time.Hour), withAuthFailLimit(1000))
	secret, _ := w.newKey(t, keyOpts{})
	start := time.Now()
	const requests = 40
	for range requests {
		wantOK(t, n.get(t, "/public/v1/key", secret))
		wantError(t, n.get(t, "/public/v1/key", store.NewSecret()), 401, "unauthorized", "unknown")
	}
	most := 1 + int(time.Since(start)/(10*time.Second))
	logs := n.logs.String()
	for _, msg := range []string{"limits decided by this node alone", "failed-auth limit decided by this node alone"} {
		got := 0
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, `"msg":"`+msg+`"`) {
				got++
				if !strings.Contains(l, `"suppressed":`) {
					t.Errorf("%q line without the suppressed count: %s", msg, l)
				}
			}
		}
		if got < 1 || got > most {
			t.Errorf("%q: got %d lines for %d requests, want 1..%d", msg, got, requests, most)
		}
	}
}

// rtDown makes every command fail as if Redis refused connections while
// down is set.
type rtDown struct{ down atomic.Bool }

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (h *rtDown) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rtDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.down.Load() {
			cmd.SetErr(errRefused)
			return errRefused
		}
		return next(ctx, cmd)
	}
}
func (h *rtDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.down.Load() {
			for _, c := range cmds {
				c.SetErr(errRefused)
			}
			return errRefused
		}
		return next(ctx, cmds)
	}
}

// TestRedisOutageRepairsNothing: while Redis does not answer, the data
// routes answer from Postgres and do not try to repair the cache (which
// would wait on the dead server and log "cache repair failed" once per
// request).
func TestRedisOutageRepairsNothing(t *testing.T) {
	w := newWorld(t, withIngest())
	opt, err := redis.ParseURL(testenv.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	hook := &rtDown{}
	rdb.AddHook(hook)
	n := w.node(t, withRedis(rdb))
	secret := rtSecret(t, w)
	rtFixture(t, w)
	w.settle(t, secret, n)

	hook.down.Store(true)
	start := time.Now()
	paths := []string{
		"/public/v1/events/E-main",
		"/public/v1/prices/snapshot?ids=M-a,m-b,nope",
		"/public/v1/markets/M-a/trades",
	}
	for range 15 {
		for _, p := range paths {
			if a := n.get(t, p, secret); a.status != http.StatusOK {
				t.Fatalf("%s with Redis down: got %d %.300s, want 200", p, a.status, a.body)
			}
		}
	}
	most := 1 + int(time.Since(start)/(10*time.Second))
	if got := strings.Count(n.logs.String(), `"msg":"cache repair failed"`); got > most {
		t.Errorf("got %d \"cache repair failed\" lines for %d requests, want at most %d", got, 15*len(paths), most)
	}
}
