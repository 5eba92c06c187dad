package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/store"
)

// The walk tests run a real API node over a real in-process ingest worker:
// events are published to JetStream, the worker writes Postgres and Redis,
// and the node pages /events from Redis (or, with the listing marked
// incomplete, from Postgres) while more events appear, resolve and merge.

var cwVenues = [4]string{"venue_a", "venue_b", "venue_c", "venue_d"}

// cwEvent is the test's model of one published event.
type cwEvent struct {
	id       string
	version  int64
	category string
	venues   [4]bool
	status   string // active, resolved or merged
}

func (ev *cwEvent) venueCount() int {
	n := 0
	for _, v := range ev.venues {
		if v {
			n++
		}
	}
	return n
}

// listed reports whether the event is in /events at all.
func (ev *cwEvent) listed() bool { return ev.status == store.StatusActive && ev.venueCount() >= 2 }

// cwFilter is one /events filter combination.
type cwFilter struct {
	category  string
	venue     string // "" or venue_a…venue_d
	minVenues int    // 0 = absent
}

func (f cwFilter) query() string {
	v := url.Values{}
	if f.category != "" {
		v.Set("category", f.category)
	}
	if f.venue != "" {
		v.Set("venue", f.venue)
	}
	if f.minVenues != 0 {
		v.Set("min_venues", fmt.Sprint(f.minVenues))
	}
	return v.Encode()
}

func (f cwFilter) matches(category string, venues [4]bool, count int) bool {
	if f.category != "" && category != f.category {
		return false
	}
	if f.venue != "" && !venues[slices.Index(cwVenues[:], f.venue)] {
		return false
	}
	return count >= max(2, f.minVenues)
}

// cwWorld is a world with ingest, one node serving its data routes, a
// markets:read key, and the walk's model of the events it published.
type cwWorld struct {
	*world
	n      *node
	secret string // a markets:read key of account
	acct   string

	mu      sync.Mutex
	events  map[string]*cwEvent
	touched map[string]bool // ids changed since the current walk began
	rng     *rand.Rand
}

// cwStartWorld starts a world with ingest, an API node that serves the data
// routes from the worker's cache, and gives the world a key.
func cwStartWorld(t *testing.T) *cwWorld {
	t.Helper()
	w := &cwWorld{
		world:  newWorld(t, withIngest()),
		events: map[string]*cwEvent{}, touched: map[string]bool{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed)),
	}
	// The store is empty: the listing is complete, so pages come from Redis.
	if ok, err := w.cache.ListingComplete(t.Context()); err != nil || !ok {
		t.Fatalf("listing complete = %v, %v after EnsureComplete", ok, err)
	}
	w.n = w.node(t)
	w.acct = w.account(t, true)
	w.secret, _ = w.key(t, w.acct, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	return w
}

// cwPublish sends the event's current model state as the next version. The
// caller holds w.mu.
func (w *cwWorld) cwPublish(ctx context.Context, ev *cwEvent) (jetstream.PubAckFuture, error) {
	ev.version++
	names := []string{"venue_a_event_ticker", "venue_b_event_slug", "venue_c_event_id", "venue_d_event_id"}
	body := map[string]any{
		"universal_id": ev.id, "version": ev.version, "title": "Will " + ev.id + " happen?",
		"category": ev.category, "status": ev.status, "merged_into": nil,
		"volume": float64(len(ev.id)) * 10.5, "updated_at": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
	}
	if ev.status == store.StatusMerged {
		body["merged_into"] = "cw-merge-target"
	}
	for i, name := range names {
		body[name] = nil
		if ev.venues[i] {
			v := strings.ToUpper(cwVenues[i][6:]) + "-" + ev.id
			body[name] = v[:min(len(v), 64)] // venue ids match the id pattern too
		}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(w.icfg.SubjectPrefix + ".event." + ev.id)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-v%d", ev.id, ev.version))
	return w.js.PublishMsgAsync(msg)
}

// change applies fn to the model of id (creating it when new), marks it
// touched and publishes it, waiting for the stream to store it. It returns
// the message's stream sequence (0 when publishing failed).
func (w *cwWorld) change(t testing.TB, id string, fn func(ev *cwEvent)) uint64 {
	t.Helper()
	w.mu.Lock()
	ev := w.events[id]
	if ev == nil {
		ev = &cwEvent{id: id}
		w.events[id] = ev
	}
	fn(ev)
	w.touched[id] = true
	f, err := w.cwPublish(context.Background(), ev)
	w.mu.Unlock()
	if err != nil {
		t.Errorf("publish %s: %v", id, err)
		return 0
	}
	select {
	case ack := <-f.Ok():
		return ack.Sequence
	case err := <-f.Err():
		t.Errorf("publish %s: %v", id, err)
	case <-time.After(10 * time.Second):
		t.Errorf("publish %s: no ack within 10s", id)
	}
	return 0
}

// cwIDAlphabet holds the id characters in bytewise order: '-' < digits <
// upper case < '_' < lower case, where locale collations disagree.
const cwIDAlphabet = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

// trickyID returns a fresh id, often a prefix or extension of an existing one.
func (w *cwWorld) trickyID() string {
	for {
		var id string
		switch k := w.rng.IntN(10); {
		case k < 2: // one or two characters from the edges of the alphabet
			edges := "-09AZ_az"
			id = string(edges[w.rng.IntN(len(edges))])
			if w.rng.IntN(2) == 0 {
				id += string(edges[w.rng.IntN(len(edges))])
			}
		case k < 6 && len(w.events) > 0: // an existing id with a suffix, or cut short
			ids := make([]string, 0, len(w.events))
			for id := range w.events {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			base := ids[w.rng.IntN(len(ids))]
			if w.rng.IntN(3) == 0 && len(base) > 1 {
				id = base[:len(base)-1]
			} else {
				id = base + string("-_0Aa"[w.rng.IntN(5)])
			}
		case k < 7: // long
			n := 56 + w.rng.IntN(9)
			b := make([]byte, n)
			for i := range b {
				b[i] = cwIDAlphabet[w.rng.IntN(len(cwIDAlphabet))]
			}
			id = string(b)
		default:
			n := 2 + w.rng.IntN(10)
			b := make([]byte, n)
			for i := range b {
				b[i] = cwIDAlphabet[w.rng.IntN(len(cwIDAlphabet))]
			}
			id = string(b)
		}
		if len(id) <= 64 && w.events[id] == nil {
			return id
		}
	}
}

var cwCategories = []string{"politics", "sports", "crypto-2", "x"}

// randomVenues picks venues; with served, at least two.
func (w *cwWorld) randomVenues(served bool) [4]bool {
	for {
		var v [4]bool
		for i := range v {
			v[i] = w.rng.IntN(2) == 0
		}
		n := 0
		for _, b := range v {
			if b {
				n++
			}
		}
		if served == (n >= 2) {
			return v
		}
	}
}

// seed publishes n served active events and some that are never listed
// (resolved, merged, on one venue), and waits until they are applied.
func (w *cwWorld) seed(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	w.mu.Lock()
	var futures []jetstream.PubAckFuture
	add := func(status string, served bool) {
		id := w.trickyID()
		ev := &cwEvent{id: id, category: cwCategories[w.rng.IntN(len(cwCategories))], status: status, venues: w.randomVenues(served)}
		w.events[id] = ev
		f, err := w.cwPublish(ctx, ev)
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		futures = append(futures, f)
	}
	for range n {
		add(store.StatusActive, true)
	}
	for range n / 10 {
		add(store.StatusResolved, true)
		add(store.StatusMerged, true)
		add(store.StatusActive, false)
	}
	w.mu.Unlock()
	select {
	case <-w.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("seed: publishes not acknowledged within 30s")
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("seed publish: %v", err)
		}
	}
	w.applied(t)
	w.noRejects(t)
}

// cwSummary is the part of an /events item the walk checks.
type cwSummary struct {
	ID         string  `json:"universal_id"`
	Category   string  `json:"category"`
	Status     string  `json:"status"`
	VenueA     *string `json:"venue_a_event_ticker"`
	VenueB     *string `json:"venue_b_event_slug"`
	VenueC     *string `json:"venue_c_event_id"`
	VenueD     *string `json:"venue_d_event_id"`
	VenueCount int     `json:"venue_count"`
}

func (s cwSummary) venues() ([4]bool, int) {
	v := [4]bool{s.VenueA != nil, s.VenueB != nil, s.VenueC != nil, s.VenueD != nil}
	n := 0
	for _, b := range v {
		if b {
			n++
		}
	}
	return v, n
}

type cwPage struct {
	Data       []cwSummary `json:"data"`
	NextCursor *string     `json:"next_cursor"`
}

// page gets one /events page and checks its shape.
func (w *cwWorld) page(t *testing.T, secret, query string) (cwPage, answer) {
	t.Helper()
	a := w.n.get(t, "/public/v1/events?"+query, secret)
	if a.status != http.StatusOK {
		t.Fatalf("GET /events?%s: status %d, body %s", query, a.status, a.body)
	}
	var p cwPage
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("GET /events?%s: decode %s: %v", query, a.body, err)
	}
	if !strings.Contains(string(a.body), `"next_cursor":`) {
		t.Errorf("GET /events?%s: no next_cursor member in %s", query, a.body)
	}
	return p, a
}

// walk pages /events under f with limit 7 to the end, calling between(pos,
// page) after each page but the last, and checks the contract's promises:
// strictly ascending ids (so no duplicates), only active listed events that
// match f, and every event that stayed listed and matching for the whole
// walk visited exactly once.
func (w *cwWorld) walk(t *testing.T, f cwFilter, between func(pos string, page int)) int {
	t.Helper()
	w.mu.Lock()
	before := map[string]bool{}
	for id, ev := range w.events {
		if ev.listed() && f.matches(ev.category, ev.venues, ev.venueCount()) {
			before[id] = true
		}
	}
	clear(w.touched)
	w.mu.Unlock()

	base := f.query()
	if base != "" {
		base += "&"
	}
	var visited []string
	cursor := ""
	pages := 0
	for {
		pages++
		if pages > 2000 {
			t.Fatalf("walk under %q did not end after 2000 pages", f.query())
		}
		q := base + "limit=7"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p, _ := w.page(t, w.secret, q)
		if len(p.Data) > 7 {
			t.Fatalf("page %d under %q: %d items, want at most 7", pages, f.query(), len(p.Data))
		}
		if p.NextCursor != nil && len(p.Data) != 7 {
			t.Errorf("page %d under %q: %d items and a next cursor, want 7", pages, f.query(), len(p.Data))
		}
		for _, s := range p.Data {
			v, n := s.venues()
			if s.Status != store.StatusActive || n < 2 || s.VenueCount != n || !f.matches(s.Category, v, n) {
				t.Errorf("walk under %q: item %+v is not an active listed event matching the filter", f.query(), s)
			}
			if len(visited) > 0 && s.ID <= visited[len(visited)-1] {
				t.Errorf("walk under %q: %q after %q, want strictly ascending bytewise ids", f.query(), s.ID, visited[len(visited)-1])
			}
			visited = append(visited, s.ID)
		}
		if p.NextCursor == nil {
			break
		}
		if len(p.Data) == 0 {
			t.Fatalf("walk under %q: empty page with a next cursor", f.query())
		}
		cursor = *p.NextCursor
		if between != nil {
			between(visited[len(visited)-1], pages)
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]int{}
	for _, id := range visited {
		seen[id]++
		if !before[id] && !w.touched[id] {
			ev := w.events[id]
			t.Errorf("walk under %q: visited %q, which was not listed and matching before the walk and did not change during it (model %+v)", f.query(), id, ev)
		}
	}
	missed := 0
	for id := range before {
		if w.touched[id] {
			continue
		}
		if seen[id] != 1 {
			if missed++; missed <= 10 {
				t.Errorf("walk under %q: %q stayed listed for the whole walk but was visited %d times", f.query(), id, seen[id])
			}
		}
	}
	if missed > 10 {
		t.Errorf("walk under %q: %d stable events not visited exactly once", f.query(), missed)
	}
	t.Logf("walk under %q: %d pages, %d visited, %d listed before, %d changed during", f.query(), pages, len(visited), len(before), len(w.touched))
	return len(visited)
}

// pick returns a listed event matching f with its id above (after) or at
// or below (!after) pos; "" when there is none.
func (w *cwWorld) pick(f cwFilter, pos string, after bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for id, ev := range w.events {
		if ev.listed() && f.matches(ev.category, ev.venues, ev.venueCount()) && (id > pos) == after && !w.touched[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	return ids[w.rng.IntN(len(ids))]
}

// freshID returns an unused id above or below pos ("" when none is found).
func (w *cwWorld) freshID(pos string, above bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range 500 {
		id := w.trickyID()
		if (id > pos) == above {
			return id
		}
	}
	return ""
}

// matchingVenues returns venues for a new event that f lists.
func (w *cwWorld) matchingVenues(f cwFilter) [4]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		v := w.randomVenues(true)
		n := 0
		for _, b := range v {
			if b {
				n++
			}
		}
		if f.matches(cwOr(f.category, "politics"), v, n) {
			return v
		}
	}
}

func cwOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mutate is the between-pages step: new events before and after the walk
// position, and resolutions and merges of visited and unvisited events.
// On even pages it waits until the worker applied them, so they are
// certainly in effect for the next page; on odd ones it races it.
func (w *cwWorld) mutate(t *testing.T, f cwFilter) func(pos string, page int) {
	return func(pos string, page int) {
		var last uint64
		for _, above := range []bool{false, true} {
			if id := w.freshID(pos, above); id != "" {
				venues := w.matchingVenues(f)
				last = max(last, w.change(t, id, func(ev *cwEvent) {
					ev.category, ev.status, ev.venues = cwOr(f.category, "politics"), store.StatusActive, venues
				}))
			}
		}
		status := store.StatusResolved
		if page%4 >= 2 {
			status = store.StatusMerged
		}
		for _, visited := range []bool{false, true} {
			if id := w.pick(f, pos, !visited); id != "" {
				last = max(last, w.change(t, id, func(ev *cwEvent) { ev.status = status }))
			}
		}
		if page%2 == 0 {
			w.appliedUpTo(t, last)
		}
	}
}

// churn publishes until stop is closed: new events anywhere, and
// resolutions and merges of random listed events, racing the walk.
func (w *cwWorld) churn(t *testing.T, stop <-chan struct{}, done chan<- int) {
	n := 0
	defer func() { done <- n }()
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		n++
		if n%2 == 0 {
			w.mu.Lock()
			id := w.trickyID()
			cat := cwCategories[w.rng.IntN(len(cwCategories))]
			venues := w.randomVenues(true)
			w.mu.Unlock()
			w.change(t, id, func(ev *cwEvent) { ev.category, ev.status, ev.venues = cat, store.StatusActive, venues })
			continue
		}
		if id := w.pick(cwFilter{}, "", true); id != "" {
			status := store.StatusResolved
			if n%4 == 1 {
				status = store.StatusMerged
			}
			w.change(t, id, func(ev *cwEvent) { ev.status = status })
		}
	}
}

// TestWalkEventsUnderChanges walks /events under each filter combination
// while events appear, resolve and merge, in Redis and then from Postgres.
func TestWalkEventsUnderChanges(t *testing.T) {
	w := cwStartWorld(t)
	w.seed(t, 300)

	// Quiet first: with nothing changing, the walk is exactly the model.
	if got := w.walk(t, cwFilter{}, nil); got != w.countListed(cwFilter{}) {
		t.Fatalf("quiet walk visited %d, model lists %d", got, w.countListed(cwFilter{}))
	}

	filters := []cwFilter{
		{},
		{category: "politics"},
		{venue: "venue_c"},
		{minVenues: 3},
		{category: "politics", venue: "venue_c"},
		{minVenues: 2},
		{minVenues: 4},
		{category: "sports", venue: "venue_a", minVenues: 3},
	}
	run := func(name string, f cwFilter) {
		t.Run(name, func(t *testing.T) {
			stop, done := make(chan struct{}), make(chan int, 1)
			go w.churn(t, stop, done)
			visited := w.walk(t, f, w.mutate(t, f))
			close(stop)
			t.Logf("churn published %d changes", <-done)
			w.applied(t)
			if visited == 0 && w.countListed(f) > 0 {
				t.Errorf("walk under %q visited nothing", f.query())
			}
		})
	}
	for _, f := range filters {
		run("redis/"+cwOr(f.query(), "all"), f)
	}

	// The store fallback: without the completion marker the node reads pages
	// from Postgres, with the same promises.
	ok := w.prefix + "{i}:ok" // the listing's completion marker (cache/cache.go)
	layout, err := w.rdb.GetDel(t.Context(), ok).Result()
	if err != nil {
		t.Fatal(err)
	}
	if complete, err := w.cache.ListingComplete(t.Context()); err != nil || complete {
		t.Fatalf("listing complete = %v, %v after its marker was deleted", complete, err)
	}
	for _, f := range []cwFilter{{}, {category: "politics", venue: "venue_c"}, {minVenues: 3}} {
		run("postgres/"+cwOr(f.query(), "all"), f)
	}
	if err := w.rdb.Set(t.Context(), ok, layout, 0).Err(); err != nil {
		t.Fatal(err)
	}

	w.noRejects(t)
	// Quiet last: after all the changes, Redis and the model still agree.
	if got := w.walk(t, cwFilter{}, nil); got != w.countListed(cwFilter{}) {
		t.Errorf("final quiet walk visited %d, model lists %d", got, w.countListed(cwFilter{}))
	}
}

func (w *cwWorld) countListed(f cwFilter) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ev := range w.events {
		if ev.listed() && f.matches(ev.category, ev.venues, ev.venueCount()) {
			n++
		}
	}
	return n
}

// cwAlter returns the cursor with its decoded byte i flipped, re-encoded.
func cwAlter(t *testing.T, cursor string, i int) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("cursor %q is not base64url: %v", cursor, err)
	}
	raw[(i+len(raw))%len(raw)] ^= 0x01
	return base64.RawURLEncoding.EncodeToString(raw)
}

func cwPageIDs(p cwPage) []string {
	out := make([]string, len(p.Data))
	for i, s := range p.Data {
		out[i] = s.ID
	}
	return out
}

// TestWalkCursorReplay is the HTTP tamper matrix: a page-1 cursor replayed
// with other filters, by another account, or altered, is 422
// invalid_request; with another limit, or min_venues 1/2/absent, it pages on.
func TestWalkCursorReplay(t *testing.T) {
	w := cwStartWorld(t)
	w.seed(t, 120)
	sameAcct, _ := w.key(t, w.acct, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	otherAcct, _ := w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}})

	const filtered = "category=politics"
	p1, _ := w.page(t, w.secret, filtered+"&limit=7")
	if p1.NextCursor == nil {
		t.Fatalf("page 1 under %s has no next cursor; the seed is too small", filtered)
	}
	c := *p1.NextCursor
	esc := url.QueryEscape(c)
	p2, _ := w.page(t, w.secret, filtered+"&limit=7&cursor="+esc)
	want2 := cwPageIDs(p2)
	if len(want2) == 0 || want2[0] <= p1.Data[len(p1.Data)-1].ID {
		t.Fatalf("page 2 %q does not continue after page 1's last %q", want2, p1.Data[len(p1.Data)-1].ID)
	}

	accepted := []struct {
		name, query, secret string
		want                []string
	}{
		{"same", filtered + "&limit=7&cursor=" + esc, w.secret, want2},
		{"limit 3", filtered + "&limit=3&cursor=" + esc, w.secret, want2[:min(3, len(want2))]},
		{"limit absent", filtered + "&cursor=" + esc, w.secret, nil},
		{"limit 100", filtered + "&limit=100&cursor=" + esc, w.secret, nil},
		{"min_venues 1", filtered + "&min_venues=1&limit=7&cursor=" + esc, w.secret, want2},
		{"min_venues 2", filtered + "&min_venues=2&limit=7&cursor=" + esc, w.secret, want2},
		{"parameters reordered", "cursor=" + esc + "&limit=7&" + filtered, w.secret, want2},
		{"unknown parameter", filtered + "&limit=7&foo=bar&cursor=" + esc, w.secret, want2},
		{"another key of the account", filtered + "&limit=7&cursor=" + esc, sameAcct, want2},
	}
	for _, tt := range accepted {
		p, _ := w.page(t, tt.secret, tt.query)
		got := cwPageIDs(p)
		if tt.want != nil && strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: page %q, want %q", tt.name, got, tt.want)
		}
		if len(got) > 0 && got[0] != want2[0] {
			t.Errorf("%s: page starts at %q, want %q", tt.name, got[0], want2[0])
		}
	}

	refused := map[string]struct{ query, secret string }{
		"no filter":      {"limit=7&cursor=" + esc, w.secret},
		"other category": {"category=sports&limit=7&cursor=" + esc, w.secret},
		"venue added":    {filtered + "&venue=venue_a&limit=7&cursor=" + esc, w.secret},
		"min_venues 3":   {filtered + "&min_venues=3&limit=7&cursor=" + esc, w.secret},
		"min_venues 4":   {filtered + "&min_venues=4&limit=7&cursor=" + esc, w.secret},
		"other account":  {filtered + "&limit=7&cursor=" + esc, otherAcct},
		"first byte":     {filtered + "&limit=7&cursor=" + url.QueryEscape(cwAlter(t, c, 0)), w.secret},
		"middle byte":    {filtered + "&limit=7&cursor=" + url.QueryEscape(cwAlter(t, c, len(c)/3)), w.secret},
		"last byte":      {filtered + "&limit=7&cursor=" + url.QueryEscape(cwAlter(t, c, -1)), w.secret},
		"truncated":      {filtered + "&limit=7&cursor=" + url.QueryEscape(c[:len(c)-1]), w.secret},
		"appended LF":    {filtered + "&limit=7&cursor=" + esc + "%0A", w.secret},
		"inserted CRLF":  {filtered + "&limit=7&cursor=" + url.QueryEscape(c[:4]+"\r\n"+c[4:]), w.secret},
		"appended char":  {filtered + "&limit=7&cursor=" + esc + "A", w.secret},
		"garbage":        {filtered + "&limit=7&cursor=!!!", w.secret},
		"random base64":  {filtered + "&limit=7&cursor=" + base64.RawURLEncoding.EncodeToString(randomBytes(60)), w.secret},
		"altered head":   {filtered + "&limit=7&cursor=" + url.QueryEscape(strings.Replace(c, c[:8], "QUFBQUFB", 1)), w.secret},
	}
	// The last base64 character of a cursor carries unused low bits unless
	// the token's length is a multiple of 3: a text differing only there
	// decodes to the same bytes and must still be refused.
	if raw, _ := base64.RawURLEncoding.DecodeString(c); len(raw)%3 != 0 {
		const al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		i := strings.IndexByte(al, c[len(c)-1])
		refused["unused bits of the last character"] = struct{ query, secret string }{
			filtered + "&limit=7&cursor=" + url.QueryEscape(c[:len(c)-1]+string(al[i+1])), w.secret,
		}
	}
	for name, tt := range refused {
		a := w.n.get(t, "/public/v1/events?"+tt.query, tt.secret)
		if a.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422; body %s", name, a.status, a.body)
			continue
		}
		wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "cursor")
		wantLimitHeaders(t, a, true)
	}

	// Parameters are checked before the cursor: a bad limit with a good
	// cursor is about the limit.
	a := w.n.get(t, "/public/v1/events?"+filtered+"&limit=0&cursor="+esc, w.secret)
	wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "limit")

	// An unfiltered cursor pages on under min_venues 1 and 2, and is refused
	// under 3.
	u1, _ := w.page(t, w.secret, "limit=7")
	if u1.NextCursor == nil {
		t.Fatal("unfiltered page 1 has no next cursor")
	}
	uc := url.QueryEscape(*u1.NextCursor)
	u2, _ := w.page(t, w.secret, "limit=7&cursor="+uc)
	for _, mv := range []string{"1", "2"} {
		p, _ := w.page(t, w.secret, "min_venues="+mv+"&limit=7&cursor="+uc)
		if strings.Join(cwPageIDs(p), ",") != strings.Join(cwPageIDs(u2), ",") {
			t.Errorf("unfiltered cursor under min_venues=%s: %q, want %q", mv, cwPageIDs(p), cwPageIDs(u2))
		}
	}
	a = w.n.get(t, "/public/v1/events?min_venues=3&limit=7&cursor="+uc, w.secret)
	wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "cursor")
	// And a min_venues=2 cursor pages on with min_venues absent.
	m1, _ := w.page(t, w.secret, "min_venues=2&limit=7")
	if m1.NextCursor == nil {
		t.Fatal("min_venues=2 page 1 has no next cursor")
	}
	p, _ := w.page(t, w.secret, "limit=7&cursor="+url.QueryEscape(*m1.NextCursor))
	if strings.Join(cwPageIDs(p), ",") != strings.Join(cwPageIDs(u2), ",") {
		t.Errorf("min_venues=2 cursor without min_venues: %q, want %q", cwPageIDs(p), cwPageIDs(u2))
	}
}
