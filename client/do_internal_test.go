package client

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 12 ", 12 * time.Second},
		{"0", 0},
		{"-4", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999999", 1e9 * time.Second},
		{"999999999999999999999999", 1e9 * time.Second},
		{"NaN", 0},
		{"1.5", 0},
		{"+3", 0},
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q): got %v, want %v", c.in, got, c.want)
		}
	}
}

func TestChunkIDs(t *testing.T) {
	var ids, unique []string
	for i := range 120 {
		id := fmt.Sprintf("m%03d", i%105)
		ids = append(ids, id)
		if i < 105 {
			unique = append(unique, id)
		}
	}
	chunks := chunkIDs(ids)
	if len(chunks) != 3 || len(chunks[0]) != 50 || len(chunks[1]) != 50 || len(chunks[2]) != 5 {
		t.Fatalf("chunk sizes: got %d chunks %v", len(chunks), sizes(chunks))
	}
	if got := slices.Concat(chunks...); !slices.Equal(got, unique) {
		t.Fatalf("chunks: got %v, want the unique ids in order %v", got, unique)
	}
	if got := chunkIDs([]string{"a", "a", "b", "a"}); len(got) != 1 || !slices.Equal(got[0], []string{"a", "b"}) {
		t.Fatalf("dedupe: got %v, want [[a b]]", got)
	}
	if got := chunkIDs(nil); len(got) != 0 {
		t.Fatalf("no ids: got %v, want no chunks", got)
	}
}

func sizes(chunks [][]string) []int {
	var s []int
	for _, c := range chunks {
		s = append(s, len(c))
	}
	return s
}

// TestBackoff: the wait doubles from min up to max, jittered within
// [d/2, d].
func TestBackoff(t *testing.T) {
	c, err := New("k", WithBackoff(100*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for attempt, d := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d *= time.Millisecond
		for range 200 {
			if got := c.backoff(attempt); got < d/2 || got > d {
				t.Fatalf("backoff(%d): got %v, want within [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
	if got := c.backoff(80); got < 500*time.Millisecond || got > time.Second {
		t.Fatalf("backoff(80): got %v, want the cap's range", got)
	}
}

// TestErrorOf: a body that is not the API's error shape still makes an
// *Error with the status; the API's shape fills code, message and
// merged_into.
func TestErrorOf(t *testing.T) {
	h := http.Header{}
	h.Set("X-Request-Id", "rid-1")
	h.Set("Retry-After", "7")
	e := errorOf(&http.Response{StatusCode: 502, Header: h}, []byte("<html>bad gateway</html>"))
	if e.Status != 502 || e.Code != "" || e.Message != "Bad Gateway: <html>bad gateway</html>" || e.RequestID != "rid-1" || e.RetryAfter != 7*time.Second {
		t.Fatalf("proxy page: got %+v", e)
	}
	e = errorOf(&http.Response{StatusCode: 404, Header: http.Header{}},
		[]byte(`{"error":{"code":"not_found","message":"event merged","merged_into":"ev-2"}}`))
	if e.Code != "not_found" || e.Message != "event merged" || e.MergedInto != "ev-2" {
		t.Fatalf("API error: got %+v", e)
	}
	if got, want := e.Error(), "marketdata: 404 not_found: event merged (merged into ev-2)"; got != want {
		t.Fatalf("Error(): got %q, want %q", got, want)
	}
}
