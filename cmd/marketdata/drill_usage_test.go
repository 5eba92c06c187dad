package main

// Usage drill: a real `marketdata api` process killed with SIGKILL loses at
// most its last second of usage counts (contract §3 "Usage").

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/internal/testenv"
)

// startAPIProcess runs `marketdata api` as a child listening on httpAddr.
func (d *drill) startAPIProcess(httpAddr, adminAddr string) *subprocess {
	d.t.Helper()
	return d.startProcess([]string{"MD_HTTP_ADDR=" + httpAddr, "MD_ADMIN_ADDR=" + adminAddr}, "api", "--notice-subject", d.ic.NoticeSubject)
}

// TestDrillUsageSIGKILL: an API process serving requests is killed with
// SIGKILL; the counts in Postgres hold at least every request answered more
// than a second before the kill, and never more than were sent.
func TestDrillUsageSIGKILL(t *testing.T) {
	d := newDrill(t, testenv.Database(t), "", "")
	d.sharedRedis()
	d.sharedNATS()
	d.migrate()
	keyID, secret := d.newKey()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p := d.startAPIProcess(httpAddr, fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)))

	// Every 200 answered, by when it was received; every request sent.
	var mu sync.Mutex
	var answered []time.Time
	sent := 0
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	call := func() bool {
		mu.Lock()
		sent++
		mu.Unlock()
		code, _, err := get(client, httpAddr, "/public/v1/key", secret)
		if err != nil || code != 200 {
			return false
		}
		at := time.Now()
		mu.Lock()
		answered = append(answered, at)
		mu.Unlock()
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); !call(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("api process not answering /key 30 s after start")
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				call()
			}
		}()
	}
	// Kill once enough answers are more than a second old to judge by,
	// however slowly a busy machine answers.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		old := 0
		for _, at := range answered {
			if time.Since(at) > 1200*time.Millisecond {
				old++
			}
		}
		mu.Unlock()
		if old >= 150 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d answers more than 1.2 s old 30 s into the load", old)
		}
	}
	killed := time.Now()
	p.kill()
	close(stop)
	wg.Wait()

	before := 0 // answered more than a second before the kill
	for _, at := range answered {
		if at.Before(killed.Add(-time.Second)) {
			before++
		}
	}
	conn, err := pgx.Connect(context.Background(), d.env["MD_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var counted int64
	if err := conn.QueryRow(context.Background(), `
		SELECT coalesce(sum(u.count), 0)
		FROM usage u JOIN api_keys k ON k.account_id = u.account_id
		WHERE k.key_id = $1 AND u.route = 'key'`, keyID).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, answered %d, answered more than 1 s before the kill %d, counted %d", sent, len(answered), before, counted)
	if before < 100 {
		t.Fatalf("only %d requests answered more than a second before the kill: too few to judge", before)
	}
	if counted < int64(before) {
		t.Errorf("counted %d after SIGKILL, want at least the %d answered more than 1 s before it", counted, before)
	}
	if counted > int64(sent) {
		t.Errorf("counted %d, more than the %d requests sent", counted, sent)
	}
}
