package redisx_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

// miniClient is a client of an in-process Redis of the test's own.
func miniClient(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// TestScanKeysSingleAllPages: every matching key is handed over once, past
// the first page of SCAN, and keys that only look alike (a glob character
// of the prefix escaped) are not. It runs on the real Redis: miniredis
// answers SCAN in one page whatever its COUNT.
func TestScanKeysSingleAllPages(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	base := prefix + "md[1]:"
	var want []string
	pipe := rdb.Pipeline()
	for i := range 2500 {
		k := fmt.Sprintf("%sm:%04d", base, i)
		want = append(want, k)
		pipe.Set(ctx, k, "x", 0)
	}
	pipe.Set(ctx, prefix+"md1:m:0001", "x", 0)   // what an unescaped "md[1]:" would match
	pipe.Set(ctx, prefix+"other:m:0001", "x", 0) // another prefix
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := redisx.ScanKeys(ctx, rdb, redisx.EscapeGlob(base)+"*", func(k string) error {
		got = append(got, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("scanned %d keys (first %q), want the %d under the prefix", len(got), got[:min(3, len(got))], len(want))
	}
}

// TestScanKeysSingleErrors (miniredis): fn's error ends the scan and is returned as it
// is; a server that fails the scan gives an error naming its address.
func TestScanKeysSingleErrors(t *testing.T) {
	ctx := context.Background()
	mr, rdb := miniClient(t)
	for i := range 10 {
		if err := mr.Set(fmt.Sprintf("k:%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop here")
	calls := 0
	err := redisx.ScanKeys(ctx, rdb, "k:*", func(string) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ScanKeys = %v after %d calls, want fn's error after 1", err, calls)
	}

	mr.SetError("LOADING Redis is loading the dataset in memory")
	err = redisx.ScanKeys(ctx, rdb, "k:*", func(string) error { t.Error("fn called on a failed scan"); return nil })
	if err == nil || !strings.Contains(err.Error(), mr.Addr()) || !strings.Contains(err.Error(), "LOADING") {
		t.Errorf("ScanKeys on a failing server = %v, want its error with its address", err)
	}
}
