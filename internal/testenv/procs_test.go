package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// TestPrivateServices: each private server answers, stops, and answers
// again after Start (Redis empty, Postgres and NATS with their data).
func TestPrivateServices(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
		defer cancel()
		r := StartRedis(t)
		opt, _ := redis.ParseURL(r.URL)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r.Stop()
		if err := rdb.Ping(ctx).Err(); err == nil {
			t.Fatal("ping after Stop: got no error")
		}
		r.Start()
		if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
			t.Errorf("after restart: exists = %d, %v; want 0 (empty)", n, err)
		}
		r.Kill()
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		n := StartNATS(t)
		nc, err := nats.Connect(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		n.Stop()
		if _, err := nats.Connect(n.URL); err == nil {
			t.Fatal("connect after Stop: got no error")
		}
		n.Start()
		nc, err = nats.Connect(n.URL)
		if err != nil {
			t.Fatalf("connect after Start: %v", err)
		}
		nc.Close()
		n.Kill()
		if _, err := nats.Connect(n.URL); err == nil {
			t.Fatal("connect after Kill: got no error")
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
		defer cancel()
		p := StartPostgres(t)
		conn, err := pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE x (a int); INSERT INTO x VALUES (7)"); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		p.Stop()
		if _, err := pgx.Connect(ctx, p.URL("postgres")); err == nil {
			t.Fatal("connect after Stop: got no error")
		}
		p.Start()
		conn, err = pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			t.Fatalf("connect after Start: %v", err)
		}
		defer conn.Close(ctx)
		var a int
		if err := conn.QueryRow(ctx, "SELECT a FROM x").Scan(&a); err != nil || a != 7 {
			t.Errorf("after restart: a = %d, %v; want 7", a, err)
		}
		p.Kill()
	})
}
