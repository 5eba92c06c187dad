package redisx_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

func TestScanKeysSingle(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	for _, k := range []string{"a:1", "a:2", "b:1"} {
		if err := rdb.Set(ctx, prefix+k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := redisx.ScanKeys(ctx, rdb, prefix+"a:*", func(k string) error {
		got = append(got, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{prefix + "a:1", prefix + "a:2"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestScanKeysUnknownClient(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer func() { _ = ring.Close() }()
	if err := redisx.ScanKeys(context.Background(), ring, "*", func(string) error { return nil }); err == nil {
		t.Error("ScanKeys on a ring: no error, want one")
	}
}

func TestEscapeGlob(t *testing.T) {
	for in, want := range map[string]string{
		"md:":          "md:",
		"a*b?c[d]e\\f": `a\*b\?c\[d\]e\\f`,
		"{af:":         "{af:",
	} {
		if got := redisx.EscapeGlob(in); got != want {
			t.Errorf("EscapeGlob(%q) = %q, want %q", in, got, want)
		}
	}
}
