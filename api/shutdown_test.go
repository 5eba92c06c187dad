package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown: many clients keep asking while the node shuts down.
// Every request the node accepted gets a complete 200 (never cut off
// mid-answer); the others fail before any answer; after Shutdown returns, new
// connections are refused.
func TestGracefulShutdown(t *testing.T) {
	w := newWorld(t)
	secret, _ := w.newKey(t, keyOpts{})
	n := w.node(t, withLimit(1_000_000))
	addr := strings.TrimPrefix(n.base, "http://")

	const clients = 32
	var (
		ok, refused atomic.Int64
		stop        atomic.Bool
		wg          sync.WaitGroup
		mu          sync.Mutex
		broken      []string // requests cut off mid-answer or answered wrongly
	)
	report := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(broken) < 10 {
			broken = append(broken, s)
		}
	}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One keep-alive connection per client, as a real client has.
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for !stop.Load() {
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/public/v1/key", nil)
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := c.Do(req)
				if err != nil {
					// No answer began: the connection was closed or refused.
					refused.Add(1)
					time.Sleep(time.Millisecond) // pacing a refused client's retries
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				var k keyInfo
				switch {
				case err != nil:
					report("body cut off: " + err.Error())
				case resp.StatusCode != http.StatusOK:
					report("status " + resp.Status + ": " + string(body))
				case json.Unmarshal(body, &k) != nil || k.KeyID == "":
					report("incomplete body: " + string(body))
				default:
					ok.Add(1)
				}
			}
		}()
	}

	// Let the clients get going, then shut down under load.
	deadline := time.Now().Add(5 * time.Second)
	for ok.Load() < 500 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the load's progress
	}
	before := ok.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("dial after Shutdown returned: connected, want refused")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after Shutdown: %v, want connection refused", err)
	}
	select {
	case <-n.served:
		if n.serveErr != nil {
			t.Errorf("Serve returned %v, want nil", n.serveErr)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Serve did not return after Shutdown")
	}
	stop.Store(true)
	wg.Wait()

	if before < 100 {
		t.Fatalf("only %d answers before the shutdown: not under load", before)
	}
	for _, b := range broken {
		t.Errorf("accepted request not answered completely: %s", b)
	}
	t.Logf("%d complete answers (%d before Shutdown), %d requests refused", ok.Load(), before, refused.Load())
}
