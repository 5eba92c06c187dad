package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// usageOff makes a node serve /account/usage without counting: a test of
// the listing sees only the rows it wrote.
func usageOff() option { return func(c *nodeConfig) { c.api.CountUsage = false } }

// usageScopes is a key that may call every route.
var usageScopes = []string{store.ScopeMarketsRead, store.ScopeAccountRead, store.ScopeStreamRead}

// usageOf is the account's counts in Postgres as "date route" → count.
func usageOf(t *testing.T, w *world, account string) map[string]int64 {
	t.Helper()
	rows, err := w.st.Usage(t.Context(), store.UsageQuery{
		AccountID: account, From: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), Limit: 10000,
	})
	if err != nil {
		t.Fatalf("read usage: %v", err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Day.Format("2006-01-02")+" "+r.Route] = r.Count
	}
	return out
}

// waitUsage waits (at most the contract's 5 s) until the account's counts
// are want, then checks that they stay so for another two flushes: exact,
// never added twice.
func waitUsage(t *testing.T, w *world, account string, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got map[string]int64
	for {
		if got = usageOf(t, w, account); maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage 5 s later: got %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling the flushes
	}
	time.Sleep(time.Second)
	if got = usageOf(t, w, account); !maps.Equal(got, want) {
		t.Fatalf("usage a second after it was right: got %v, want %v", got, want)
	}
}

func today(w *world) string { return w.clock.Now().UTC().Format("2006-01-02") }

// TestUsageCountsExactly: requests spread over two nodes and every route
// count exactly once each on the route asked for, within 5 s: 200, 304, 404
// and 422 answers count, the window's 429, failed authentications and scope
// refusals do not, and a stream counts once at its upgrade however many
// messages follow.
func TestUsageCountsExactly(t *testing.T) {
	w := newWorld(t, withIngest())
	const limit = 18
	n1 := w.node(t, withLimit(limit))
	n2 := w.node(t, withLimit(limit))
	account := w.account(t, true)
	secret, _ := w.key(t, account, keyOpts{scopes: usageScopes})
	noMarkets, _ := w.key(t, account, keyOpts{scopes: []string{store.ScopeAccountRead}})
	revoked, rk := w.key(t, account, keyOpts{scopes: usageScopes})
	w.revoke(t, rk.ID)
	w.notify(t, account, rk.ID)

	sent := 0
	expect := func(n *node, path string, status int) {
		t.Helper()
		a := n.get(t, path, secret)
		if a.status != status {
			t.Fatalf("GET %s: %d %s, want %d", path, a.status, a.body, status)
		}
		sent++
	}
	for range 3 {
		expect(n1, "/public/v1/key", 200)
	}
	expect(n1, "/public/v1/events", 200)
	etag := n1.get(t, "/public/v1/events", secret).header.Get("ETag")
	sent++
	if a := n2.get(t, "/public/v1/events", secret, "If-None-Match", etag); a.status != 304 {
		t.Fatalf("/events with its ETag: %d %s, want 304", a.status, a.body)
	}
	sent++
	expect(n2, "/public/v1/events?limit=5", 200)
	expect(n2, "/public/v1/events?limit=0", 422)
	expect(n2, "/public/v1/events/no-such-event", 404)
	expect(n1, "/public/v1/events/no-such-event", 404)
	expect(n1, "/public/v1/markets/search?q=x", 200)
	expect(n2, "/public/v1/prices/snapshot?ids=bad!id", 422)
	expect(n2, "/public/v1/markets/no-such-market/trades", 404)
	expect(n1, "/public/v1/account/usage", 200)
	expect(n2, "/public/v1/account/usage?from=nope", 422)
	expect(n1, "/public/v1/stream", 422) // not an upgrade: a request of the window all the same
	// A stream: counted once, at its upgrade, whatever it is sent after.
	ws := n2.mustDial(t, secret)
	sent++
	for range 3 {
		ws.subscribe("no-such-market")
		ws.expect("subscribed")
	}
	// Unknown routes pass the window but name no route of the contract.
	expect(n1, "/public/v1/nothing-here", 404)

	// Not counted: failed authentications, scope refusals.
	for _, n := range []*node{n1, n2} {
		if a := n.get(t, "/public/v1/key", revoked); a.status != 401 {
			t.Fatalf("revoked key: %d %s, want 401", a.status, a.body)
		}
		if a := n.get(t, "/public/v1/events", noMarkets); a.status != 403 {
			t.Fatalf("key without markets:read: %d %s, want 403", a.status, a.body)
		}
	}
	if sent != limit {
		t.Fatalf("test bug: %d requests of the window sent, want the limit %d", sent, limit)
	}
	// The window is used up: the 429s that follow are not counted.
	for _, n := range []*node{n1, n2} {
		if a := n.get(t, "/public/v1/key", secret); a.status != 429 {
			t.Fatalf("after %d requests: %d %s, want 429", limit, a.status, a.body)
		}
	}
	d := today(w)
	waitUsage(t, w, account, map[string]int64{
		d + " key": 3, d + " events": 5, d + " event": 2, d + " search": 1, d + " snapshot": 1,
		d + " trades": 1, d + " account_usage": 2, d + " stream": 2,
	})
}

// TestUsageSurvivesRedisFlush: the counts are in Postgres, not Redis: a
// flush of everything the test keeps in Redis loses none of them, and
// counting goes on after it.
func TestUsageSurvivesRedisFlush(t *testing.T) {
	w := newWorld(t, withIngest())
	n1, n2 := w.node(t), w.node(t)
	account := w.account(t, true)
	secret, _ := w.key(t, account, keyOpts{scopes: usageScopes})
	for i := range 10 {
		[]*node{n1, n2}[i%2].get(t, "/public/v1/key", secret)
	}
	d := today(w)
	waitUsage(t, w, account, map[string]int64{d + " key": 10})
	rtFlush(t, w)
	for i := range 6 {
		if a := []*node{n1, n2}[i%2].get(t, "/public/v1/events", secret); a.status != 200 {
			t.Fatalf("/events after the flush: %d %s", a.status, a.body)
		}
	}
	waitUsage(t, w, account, map[string]int64{d + " key": 10, d + " events": 6})
}

// TestUsageAcrossMidnight: the day a request counts on is the UTC date of
// the node's clock when it passed the window: requests either side of
// midnight land on two days.
func TestUsageAcrossMidnight(t *testing.T) {
	w := newWorld(t, withIngest())
	now := w.clock.Now().UTC()
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	w.clock.Advance(midnight.Sub(now) - 2*time.Second) // 23:59:58
	n := w.node(t)
	account := w.account(t, true)
	secret, _ := w.key(t, account, keyOpts{scopes: usageScopes})
	before := today(w)
	for range 2 {
		n.get(t, "/public/v1/key", secret)
	}
	w.clock.Advance(3 * time.Second)
	after := today(w)
	if before == after {
		t.Fatalf("test bug: the clock did not cross midnight (%s)", after)
	}
	for range 3 {
		n.get(t, "/public/v1/key", secret)
	}
	waitUsage(t, w, account, map[string]int64{before + " key": 2, after + " key": 3})
	// The listing's default range ends today, the new day: both are in it.
	a := n.get(t, "/public/v1/account/usage?route=key", secret)
	rtWant200(t, a)
	if got, want := string(a.body), `{"data":[{"date":"`+before+`","route":"key","count":2},{"date":"`+after+`","route":"key","count":3}],"next_cursor":null}`; got != want {
		t.Errorf("listing:\n got %s\nwant %s", got, want)
	}
}

// usagePage is an /account/usage answer.
type usagePage struct {
	Data []struct {
		Date  string `json:"date"`
		Route string `json:"route"`
		Count int64  `json:"count"`
	} `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func decodeUsage(t *testing.T, a answer) usagePage {
	t.Helper()
	rtWant200(t, a)
	var p usagePage
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("usage page %s: %v", a.body, err)
	}
	return p
}

// TestAccountUsageListing: pages walked across two nodes hold every row of
// the range once, ascending by date then route; the defaults are 30 days
// ago to today; cursors are bound to the route, the filters and the
// account; bad parameters are 422 after the window.
func TestAccountUsageListing(t *testing.T) {
	w := newWorld(t, withIngest())
	n1 := w.node(t, usageOff())
	n2 := w.node(t, usageOff())
	account := w.account(t, true)
	secret, _ := w.key(t, account, keyOpts{scopes: usageScopes})
	other := w.account(t, true)
	otherSecret, _ := w.key(t, other, keyOpts{scopes: usageScopes})
	noScope, _ := w.key(t, account, keyOpts{scopes: []string{store.ScopeMarketsRead}})

	day := func(offset int) time.Time {
		return w.clock.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, offset)
	}
	routes := []string{"stream", "events", "key"} // written out of order
	var rows []store.UsageCount
	var want []string // "date route count", in the listing's order
	for _, off := range []int{-31, -30, -2, 0, 1} {
		for _, r := range []string{"events", "key", "stream"} { // ascending
			if off >= -30 && off <= 0 {
				want = append(want, fmt.Sprintf("%s %s %d", day(off).Format("2006-01-02"), r, 100+off))
			}
		}
		for _, r := range routes {
			rows = append(rows, store.UsageCount{AccountID: account, Day: day(off), Route: r, Count: int64(100 + off)})
			rows = append(rows, store.UsageCount{AccountID: other, Day: day(off), Route: r, Count: 7})
		}
	}
	if _, err := w.st.AddUsage(t.Context(), "seed-"+t.Name(), rows); err != nil {
		t.Fatal(err)
	}

	walk := func(query string, limit int) []string {
		t.Helper()
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			q := query + "&limit=" + fmt.Sprint(limit)
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			p := decodeUsage(t, []*node{n1, n2}[page%2].get(t, "/public/v1/account/usage?"+q, secret))
			if len(p.Data) > limit {
				t.Fatalf("page of %d items, limit %d", len(p.Data), limit)
			}
			for _, it := range p.Data {
				got = append(got, fmt.Sprintf("%s %s %d", it.Date, it.Route, it.Count))
			}
			if p.NextCursor == nil {
				return got
			}
			cursor = *p.NextCursor
			if page > 20 {
				t.Fatal("no end of pages")
			}
		}
	}
	// Defaults: 30 days ago to today, both included.
	if got := walk("x=1", 2); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("default range walked two by two:\n got %q\nwant %q", got, want)
	}
	if got := walk("x=1", 100); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("default range in one page:\n got %q\nwant %q", got, want)
	}
	// Filters: one route, an explicit range (tomorrow's row included).
	from, to := day(-2).Format("2006-01-02"), day(1).Format("2006-01-02")
	wantKey := []string{from + " key 98", day(0).Format("2006-01-02") + " key 100", to + " key 101"}
	if got := walk("route=key&from="+from+"&to="+to, 1); strings.Join(got, "\n") != strings.Join(wantKey, "\n") {
		t.Errorf("route=key from %s to %s:\n got %q\nwant %q", from, to, got, wantKey)
	}

	// Cursor binding: a cursor of the first page with the same filters and
	// another limit continues; with anything else bound it is 422.
	first := decodeUsage(t, n1.get(t, "/public/v1/account/usage?route=key&limit=1", secret))
	if first.NextCursor == nil {
		t.Fatal("first page of one: no next_cursor")
	}
	cur := url.QueryEscape(*first.NextCursor)
	if p := decodeUsage(t, n2.get(t, "/public/v1/account/usage?route=key&limit=5&cursor="+cur, secret)); len(p.Data) != 2 || p.Data[0].Count != 98 || p.Data[1].Count != 100 {
		t.Errorf("cursor with another limit: %+v, want the two rows after the first (counts 98, 100)", p.Data)
	}
	events := n1.get(t, "/public/v1/events?limit=1", secret)
	rtWant200(t, events)
	altered := []byte(*first.NextCursor)
	if i := len(altered) / 2; altered[i] == 'A' {
		altered[i] = 'B'
	} else {
		altered[i] = 'A'
	}
	for name, c := range map[string]struct{ path, secret string }{
		"other route filter":   {"/public/v1/account/usage?route=events&cursor=" + cur, secret},
		"no route filter":      {"/public/v1/account/usage?cursor=" + cur, secret},
		"other from":           {"/public/v1/account/usage?route=key&from=" + from + "&cursor=" + cur, secret},
		"other account":        {"/public/v1/account/usage?route=key&cursor=" + cur, otherSecret},
		"on /events":           {"/public/v1/events?cursor=" + cur, secret},
		"altered":              {"/public/v1/account/usage?route=key&cursor=" + url.QueryEscape(string(altered)), secret},
		"garbage":              {"/public/v1/account/usage?route=key&cursor=abc", secret},
		"limit 0":              {"/public/v1/account/usage?limit=0", secret},
		"limit 101":            {"/public/v1/account/usage?limit=101", secret},
		"limit abc":            {"/public/v1/account/usage?limit=abc", secret},
		"unknown route":        {"/public/v1/account/usage?route=prices", secret},
		"empty route":          {"/public/v1/account/usage?route=", secret},
		"bad from":             {"/public/v1/account/usage?from=2026-1-01", secret},
		"bad to":               {"/public/v1/account/usage?to=2026-02-30", secret},
		"from after to":        {"/public/v1/account/usage?from=2026-03-02&to=2026-03-01", secret},
		"367 days":             {"/public/v1/account/usage?from=2025-01-01&to=2026-01-02", secret},
		"default from, to old": {"/public/v1/account/usage?to=2000-01-01", secret},
	} {
		a := n2.get(t, c.path, c.secret)
		if a.status != 422 || !strings.Contains(string(a.body), `"invalid_request"`) || a.header.Get("RateLimit-Remaining") == "" {
			t.Errorf("%s: %d %s (RateLimit-Remaining %q), want 422 invalid_request after the window", name, a.status, a.body, a.header.Get("RateLimit-Remaining"))
		}
	}
	// A cursor of another route here: /account/keys (the account has two
	// keys, so a page of one has a next cursor).
	var keysPage struct {
		NextCursor *string `json:"next_cursor"`
	}
	kp := n1.get(t, "/public/v1/account/keys?limit=1", secret)
	if err := json.Unmarshal(kp.body, &keysPage); err != nil || keysPage.NextCursor == nil {
		t.Fatalf("/account/keys?limit=1: %d %s, want a next_cursor", kp.status, kp.body)
	}
	if a := n1.get(t, "/public/v1/account/usage?cursor="+url.QueryEscape(*keysPage.NextCursor), secret); a.status != 422 {
		t.Errorf("an /account/keys cursor on /account/usage: %d %s, want 422", a.status, a.body)
	}
	// 366 days, both ends included, is the most a query spans.
	if a := n1.get(t, "/public/v1/account/usage?from=2025-01-01&to=2026-01-01", secret); a.status != 200 {
		t.Errorf("366 days: %d %s, want 200", a.status, a.body)
	}
	// Another account sees its own rows only.
	if p := decodeUsage(t, n1.get(t, "/public/v1/account/usage?route=key&limit=100", otherSecret)); len(p.Data) != 3 || p.Data[0].Count != 7 {
		t.Errorf("other account: %+v, want its own three rows of 7", p.Data)
	}
	// Scope: account:read.
	if a := n1.get(t, "/public/v1/account/usage", noScope); a.status != 403 || !strings.Contains(string(a.body), "insufficient_scope") {
		t.Errorf("without account:read: %d %s, want 403 insufficient_scope", a.status, a.body)
	}
}

// TestAddUsageOncePerBatch: a batch added again under its id (a retry
// after a commit whose answer was lost) adds nothing.
func TestAddUsageOncePerBatch(t *testing.T) {
	w := newWorld(t)
	account := w.account(t, true)
	day := w.clock.Now().UTC().Truncate(24 * time.Hour)
	batch := []store.UsageCount{{AccountID: account, Day: day, Route: "key", Count: 4}}
	for i, want := range []bool{true, false} {
		applied, err := w.st.AddUsage(t.Context(), "b1", batch)
		if err != nil || applied != want {
			t.Fatalf("add #%d: applied %v, %v; want %v", i+1, applied, err, want)
		}
	}
	if _, err := w.st.AddUsage(t.Context(), "b2", batch); err != nil {
		t.Fatal(err)
	}
	if got := usageOf(t, w, account); got[day.Format("2006-01-02")+" key"] != 8 {
		t.Errorf("two batches of 4, one sent twice: %v, want 8", got)
	}
}

// TestSweepUsage: rows of days more than 400 days back are deleted, the
// rest kept.
func TestSweepUsage(t *testing.T) {
	w := newWorld(t)
	account := w.account(t, true)
	now := w.clock.Now()
	day := now.UTC().Truncate(24 * time.Hour)
	var batch []store.UsageCount
	for _, off := range []int{-402, -401, -400, -399, 0} {
		batch = append(batch, store.UsageCount{AccountID: account, Day: day.AddDate(0, 0, off), Route: "events", Count: 1})
	}
	if _, err := w.st.AddUsage(t.Context(), "sweep-"+t.Name(), batch); err != nil {
		t.Fatal(err)
	}
	n, err := w.st.SweepUsage(t.Context(), now)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d rows, %v; want 2 (402 and 401 days back)", n, err)
	}
	got := usageOf(t, w, account)
	for _, off := range []int{-400, -399, 0} {
		if k := day.AddDate(0, 0, off).Format("2006-01-02") + " events"; got[k] != 1 {
			t.Errorf("%d days back: swept; kept rows %v", -off, got)
		}
	}
}
