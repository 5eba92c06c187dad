package main

// Start-unready drills: api and ingest started while a dependency is down.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestDrillStartWithDependencyDown: api and ingest start while one
// dependency is down (each in turn), report it on /readyz, and become ready
// by themselves when it answers, then serve. The API is not ready without
// Postgres (schema not checked), and ready but degraded without Redis
// (search loads from Postgres, reads and limits fall back) or NATS; ingest
// is not ready without any of them.
func TestDrillStartWithDependencyDown(t *testing.T) {
	for _, dep := range []string{"postgres", "redis", "nats"} {
		t.Run(dep, func(t *testing.T) {
			var start, stop func()
			var d *drill
			switch dep {
			case "postgres":
				pg := testenv.StartPostgres(t)
				d = newDrill(t, pg.URL("marketdata"), "", "")
				d.sharedRedis()
				d.sharedNATS()
				d.migrate()
				start, stop = pg.Start, pg.Stop
			case "redis":
				rs := testenv.StartRedis(t)
				d = newDrill(t, testenv.Database(t), rs.URL, "")
				d.sharedNATS()
				d.migrate()
				start, stop = rs.Start, rs.Stop
			case "nats":
				ns := testenv.StartNATS(t)
				d = newDrill(t, testenv.Database(t), "", ns.URL)
				d.sharedRedis()
				d.migrate()
				start, stop = ns.Start, ns.Stop
			}
			_, secret := d.newKey()
			stop()

			ing := d.startIngest()
			api := d.startAPI()
			waitReadyz(t, ing.admin, 503, nil, 10*time.Second)
			if dep == "postgres" {
				waitReadyz(t, api.admin, 503, func(b string) bool { return strings.Contains(b, `"schema":`) }, 10*time.Second)
			} else {
				waitReadyz(t, api.admin, 200, func(b string) bool { return strings.Contains(b, `"`+dep+`":`) && strings.Contains(b, `"degraded"`) }, 10*time.Second)
			}
			start()
			waitReadyz(t, ing.admin, 200, nil, 30*time.Second)
			waitReadyz(t, api.admin, 200, func(b string) bool { return b == `{"status":"ready"}` }, 30*time.Second)
			d.feed(200)
			d.caughtUp(30 * time.Second)
			deadline := time.Now().Add(10 * time.Second)
			for {
				code, body, _ := get(http.DefaultClient, api.http, "/public/v1/events?limit=5", secret)
				if code == 200 && strings.Contains(body, `"universal_id"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/events after %s came up: %d %s, want 200 with events", dep, code, body)
				}
				time.Sleep(50 * time.Millisecond) // polling the data's arrival
			}
		})
	}
}

// TestDrillOldSchemaOnceReachable: api and ingest started while Postgres is
// down are not ready; when it answers with a schema that was never
// migrated, both stop with the refusal naming `marketdata migrate`, as a
// start on it always did (they never serve on an old schema).
func TestDrillOldSchemaOnceReachable(t *testing.T) {
	pg := testenv.StartPostgres(t)
	d := newDrill(t, pg.URL("postgres"), "", "") // exists, never migrated
	d.sharedRedis()
	d.sharedNATS()
	pg.Stop()
	cfg := d.config()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admins := make(chan string, 2)
	apiDone, ingestDone := make(chan error, 1), make(chan error, 1)
	go func() {
		apiDone <- runAPI(ctx, cfg, d.ic.NoticeSubject, d.logger(), newRegistry(), func(_, a string) { admins <- a })
	}()
	go func() {
		ingestDone <- runIngest(ctx, cfg, d.ic, d.logger(), newRegistry(), func(a string) { admins <- a })
	}()
	for range 2 {
		select {
		case a := <-admins:
			waitReadyz(t, a, 503, func(b string) bool { return strings.Contains(b, `"schema":`) }, 10*time.Second)
		case err := <-apiDone:
			t.Fatalf("api exited while Postgres is down: %v", err)
		case err := <-ingestDone:
			t.Fatalf("ingest exited while Postgres is down: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("nodes not listening within 30 s")
		}
	}
	pg.Start()
	for name, done := range map[string]chan error{"api": apiDone, "ingest": ingestDone} {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "run `marketdata migrate`") {
				t.Errorf("%s once Postgres answered with an old schema: got %v, want the refusal naming migrate", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s still running 30 s after Postgres answered with an old schema", name)
		}
	}
}
