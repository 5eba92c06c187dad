package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestAdmitBatchPlaces decides fixed batches in one round trip each, as the
// sender does, and checks every request's decision and the count left in
// Redis: an account's requests are counted as calls in a row would be, and
// requests from a blocked address take no place in the window.
func TestAdmitBatchPlaces(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	const bad, good = "192.0.2.66", "192.0.2.1"
	type want struct {
		blocked   bool
		allowed   bool
		remaining int
	}
	for i, tc := range []struct {
		name  string
		limit int
		used  int
		addrs []string
		want  []want
		count int // the window's count afterwards
	}{
		{"past the limit", 3, 0, []string{good, good, good, good, good},
			[]want{{false, true, 2}, {false, true, 1}, {false, true, 0}, {false, false, 0}, {false, false, 0}}, 3},
		{"blocked first, little room", 3, 1, []string{bad, bad, good, good},
			[]want{{true, false, 0}, {true, false, 0}, {false, true, 1}, {false, true, 0}}, 3},
		{"blocked between", 10, 0, []string{bad, good, bad, good},
			[]want{{true, false, 0}, {false, true, 9}, {true, false, 0}, {false, true, 8}}, 2},
		{"only blocked", 5, 4, []string{bad, bad},
			[]want{{true, false, 0}, {true, false, 0}}, 4},
		{"full window, blocked too", 2, 2, []string{bad, good},
			[]want{{true, false, 0}, {false, false, 0}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := 30 * time.Second
			l := mustNewInternal(t, rdb, Config{Limit: tc.limit, Window: w, AuthFailLimit: 1, AuthFailWindow: time.Minute,
				Prefix: fmt.Sprintf("%s%d:", prefix, i), Timeout: 2 * time.Second})
			roomInWindow(t, rdb, w, 3*time.Second)
			if _, _, err := l.FailOrBlocked(ctx, bad); err != nil {
				t.Fatal(err)
			}
			for range tc.used {
				if a, err := l.Admit(ctx, good, "acc"); err != nil || !a.Window.Allowed {
					t.Fatalf("Admit: %+v, %v", a, err)
				}
			}
			var reqs []*admitReq
			for _, a := range tc.addrs {
				reqs = append(reqs, &admitReq{addr: a, account: "acc", done: make(chan struct{})})
			}
			l.admitBatch(reqs)
			for j, r := range reqs {
				<-r.done
				got := want{r.res.Blocked, r.res.Window.Allowed, r.res.Window.Remaining}
				if r.err != nil || got != tc.want[j] {
					t.Errorf("request %d (%s): got %+v, %v; want %+v", j, tc.addrs[j], got, r.err, tc.want[j])
				}
			}
			n, err := rdb.HGet(ctx, l.accountKey("acc"), "n").Int()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			// Places given back are holes, taken again first.
			holes, err := rdb.ZCard(ctx, l.holesKey("acc")).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n -= int(holes); n != tc.count {
				t.Errorf("window count afterwards: %d, want %d", n, tc.count)
			}
		})
	}
}

// TestAdmitBatchLostScript: after Redis lost its scripts, a batch over
// several accounts is decided by re-running each account's window call once
// (in one more round trip), with the same places as if nothing was lost.
// SCRIPT FLUSH runs on a private Redis: on the shared one, other packages'
// tests load the scripts again between the flush and the batch (and lose
// theirs).
func TestAdmitBatchLostScript(t *testing.T) {
	rdb, _ := testenv.PrivateRedis(t)
	prefix := "t:"
	ctx := context.Background()
	w := 30 * time.Second
	l := mustNewInternal(t, rdb, Config{Limit: 2, Window: w, AuthFailLimit: 5, AuthFailWindow: time.Minute,
		Prefix: prefix, Timeout: 2 * time.Second})
	roomInWindow(t, rdb, w, 3*time.Second)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var reqs []*admitReq
	for i := range 9 {
		reqs = append(reqs, &admitReq{addr: "192.0.2.1", account: fmt.Sprintf("acc%d", i%3), done: make(chan struct{})})
	}
	l.admitBatch(reqs)
	for i, r := range reqs {
		<-r.done
		place := i / 3 // each account's 0th, 1st, 2nd request
		wantAllowed, wantRemaining := place < 2, max(1-place, 0)
		if r.err != nil || r.res.Window.Allowed != wantAllowed || r.res.Window.Remaining != wantRemaining {
			t.Errorf("request %d (%s): %+v, %v; want allowed %v, remaining %d", i, r.account, r.res.Window, r.err, wantAllowed, wantRemaining)
		}
	}
	for a := range 3 {
		if n, err := rdb.HGet(ctx, l.accountKey(fmt.Sprintf("acc%d", a)), "n").Int(); err != nil || n != 2 {
			t.Errorf("acc%d: window count %d (%v), want 2: charged once", a, n, err)
		}
	}
	if got := l.windowCalls.Load(); got != 6 {
		t.Errorf("window calls: %d, want 6 (3 lost, 3 re-run)", got)
	}
}

// mustNewInternal is New for a config the test knows is valid.
func mustNewInternal(t *testing.T, rdb redis.UniversalClient, cfg Config) *Limiter {
	t.Helper()
	l, err := New(rdb, cfg, nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// roomInWindow waits until the aligned window of length w has at least
// need left on the Redis clock.
func roomInWindow(t *testing.T, rdb *redis.Client, w, need time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, wms := now.UnixMilli(), w.Milliseconds()
	if left := time.Duration(wms-ms%wms) * time.Millisecond; left < need {
		time.Sleep(left + 5*time.Millisecond)
	}
}
