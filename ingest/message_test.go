package ingest

import (
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

const testPrefix = DefaultSubjectPrefix

// body is a message body under construction: cases start from a valid body of
// their kind and edit it.
type body map[string]any

func eventBody() body {
	return body{
		"universal_id": "ev-1", "version": 7, "title": "Who wins the 2028 election?",
		"category": "us-politics", "status": "active", "merged_into": nil,
		"venue_a_event_ticker": "PRES28", "venue_b_event_slug": "presidential-election-2028",
		"venue_c_event_id": nil, "volume": 125000.5, "updated_at": "2026-01-02T10:00:00.5Z",
	}
}

func marketBody() body {
	return body{
		"universal_id": "mk-1", "event_id": "ev-1", "version": 3, "title": "Democratic candidate",
		"status": "active", "venues": body{"venue_a": "PRES28-DEM", "venue_b": "0xabc_1"},
		"updated_at": "2026-01-02T10:00:01Z",
	}
}

func priceBody() body {
	return body{
		"market_id": "mk-1", "version": 42, "ts": "2026-01-02T10:00:02.25Z",
		"quotes": body{
			"venue_a": body{"bid": 0.41, "ask": 0.43, "last": 0.42, "volume_24h": 1000.0},
			"venue_b": body{"bid": nil, "ask": 0.44, "volume_24h": 0},
		},
	}
}

func tradeBody() body {
	return body{
		"market_id": "mk-1", "trade_id": "t-100", "venue": "venue_c", "price": 0.42,
		"size": 10.5, "side": "buy", "ts": "2026-01-02T10:00:03.000001Z",
	}
}

// with sets the value at a dotted path ("quotes.venue_a.bid") and returns b.
func (b body) with(path string, v any) body {
	m, last := b.parent(path)
	m[last] = v
	return b
}

// without deletes the value at a dotted path and returns b.
func (b body) without(path string) body {
	m, last := b.parent(path)
	delete(m, last)
	return b
}

func (b body) parent(path string) (body, string) {
	keys := strings.Split(path, ".")
	m := b
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(body)
	}
	return m, keys[len(keys)-1]
}

func (b body) json() []byte {
	data, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return data
}

func ptr[T any](v T) *T { return &v }

func subjectOf(kind, id string) string { return testPrefix + "." + kind + "." + id }

func utc(year int, month time.Month, day, hour, min, sec, nsec int) time.Time {
	return time.Date(year, month, day, hour, min, sec, nsec, time.UTC)
}

type validCase struct {
	name    string
	subject string
	data    []byte
	want    *Update
}

func validCases() []validCase {
	event := func() *store.Event {
		return &store.Event{
			ID: "ev-1", Version: 7, Title: "Who wins the 2028 election?", Category: "us-politics",
			Status: "active", VenueIDs: [4]*string{ptr("PRES28"), ptr("presidential-election-2028"), nil, nil},
			Volume: 125000.5, UpdatedAt: utc(2026, 1, 2, 10, 0, 0, 500_000_000),
		}
	}
	market := func() *store.Market {
		return &store.Market{
			ID: "mk-1", EventID: "ev-1", Version: 3, Title: "Democratic candidate", Status: "active",
			Venues:    map[string]string{"venue_a": "PRES28-DEM", "venue_b": "0xabc_1"},
			UpdatedAt: utc(2026, 1, 2, 10, 0, 1, 0),
		}
	}
	price := func() *store.Price {
		return &store.Price{
			MarketID: "mk-1", Version: 42, TS: utc(2026, 1, 2, 10, 0, 2, 250_000_000),
			Quotes: map[string]store.Quote{
				"venue_a": {Bid: ptr(0.41), Ask: ptr(0.43), Last: ptr(0.42), Volume24h: 1000},
				"venue_b": {Ask: ptr(0.44)},
			},
		}
	}
	trade := func() *store.Trade {
		return &store.Trade{
			MarketID: "mk-1", TradeID: "t-100", Venue: "venue_c", Price: 0.42, Size: 10.5,
			Side: "buy", TS: utc(2026, 1, 2, 10, 0, 3, 1000),
		}
	}
	evSubj, mkSubj := subjectOf(KindEvent, "ev-1"), subjectOf(KindMarket, "mk-1")
	prSubj, trSubj := subjectOf(KindPrice, "mk-1"), subjectOf(KindTrade, "mk-1")
	id64 := strings.Repeat("aZ9_-", 12) + "abcd"
	cat32 := strings.Repeat("a-9", 10) + "zz"

	cases := []validCase{
		{"event/active", evSubj, eventBody().json(), &Update{Kind: KindEvent, Event: event()}},
		{"event/merged", evSubj, eventBody().with("status", "merged").with("merged_into", "ev-2").json(),
			&Update{Kind: KindEvent, Event: func() *store.Event {
				e := event()
				e.Status, e.MergedInto = "merged", ptr("ev-2")
				return e
			}()}},
		{"event/resolved drops merged_into", evSubj, eventBody().with("status", "resolved").with("merged_into", "ev-2").json(),
			&Update{Kind: KindEvent, Event: func() *store.Event { e := event(); e.Status = "resolved"; return e }()}},
		{"event/four venue ids", evSubj, eventBody().with("venue_c_event_id", "c-1").with("venue_d_event_id", "d-1").json(),
			&Update{Kind: KindEvent, Event: func() *store.Event {
				e := event()
				e.VenueIDs[2], e.VenueIDs[3] = ptr("c-1"), ptr("d-1")
				return e
			}()}},
		{"event/no venue ids", evSubj, eventBody().without("venue_a_event_ticker").with("venue_b_event_slug", nil).json(),
			&Update{Kind: KindEvent, Event: func() *store.Event { e := event(); e.VenueIDs = [4]*string{}; return e }()}},
		{"event/longest id and category, zero volume", subjectOf(KindEvent, id64),
			eventBody().with("universal_id", id64).with("category", cat32).with("volume", 0).json(),
			&Update{Kind: KindEvent, Event: func() *store.Event {
				e := event()
				e.ID, e.Category, e.Volume = id64, cat32, 0
				return e
			}()}},
		{"event/offset converted to UTC", evSubj, eventBody().with("updated_at", "2026-01-02T12:00:00.5+02:00").json(),
			&Update{Kind: KindEvent, Event: event()}},
		{"event/unknown fields ignored", evSubj,
			eventBody().with("tags", []string{"x"}).with("extra", body{"nested": true}).with("schema", 2).json(),
			&Update{Kind: KindEvent, Event: event()}},

		{"market/active", mkSubj, marketBody().json(), &Update{Kind: KindMarket, Market: market()}},
		{"market/active ignores resolution", mkSubj,
			marketBody().with("resolved_at", "2026-01-03T00:00:00Z").with("result", "yes").json(),
			&Update{Kind: KindMarket, Market: market()}},
		{"market/resolved", mkSubj,
			marketBody().with("status", "resolved").with("resolved_at", "2026-01-03T01:30:00.123456789-03:00").with("result", "yes").json(),
			&Update{Kind: KindMarket, Market: func() *store.Market {
				m := market()
				m.Status, m.ResolvedAt, m.Result = "resolved", ptr(utc(2026, 1, 3, 4, 30, 0, 123456000)), ptr("yes")
				return m
			}()}},
		{"market/no venues", mkSubj, marketBody().with("venues", body{}).json(),
			&Update{Kind: KindMarket, Market: func() *store.Market { m := market(); m.Venues = map[string]string{}; return m }()}},
		{"market/unknown fields ignored", mkSubj, marketBody().with("outcome_index", 1).with("meta", nil).json(),
			&Update{Kind: KindMarket, Market: market()}},

		{"price/two quotes", prSubj, priceBody().json(), &Update{Kind: KindPrice, Price: price()}},
		{"price/bounds 0 and 1 are inside", prSubj,
			priceBody().with("quotes.venue_a.bid", 0).with("quotes.venue_a.ask", 1).with("quotes.venue_a.last", 1).json(),
			&Update{Kind: KindPrice, Price: func() *store.Price {
				p := price()
				p.Quotes["venue_a"] = store.Quote{Bid: ptr(0.0), Ask: ptr(1.0), Last: ptr(1.0), Volume24h: 1000}
				return p
			}()}},
		{"price/no quotes", prSubj, priceBody().with("quotes", body{}).json(),
			&Update{Kind: KindPrice, Price: func() *store.Price { p := price(); p.Quotes = map[string]store.Quote{}; return p }()}},
		{"price/unknown fields ignored", prSubj,
			priceBody().with("source", "matcher-3").with("quotes.venue_a.depth", []int{1, 2}).json(),
			&Update{Kind: KindPrice, Price: price()}},
		{"price/truncated to microseconds", prSubj, priceBody().with("ts", "2026-01-02T10:00:02.123456789Z").json(),
			&Update{Kind: KindPrice, Price: func() *store.Price { p := price(); p.TS = utc(2026, 1, 2, 10, 0, 2, 123456000); return p }()}},

		{"trade/buy", trSubj, tradeBody().json(), &Update{Kind: KindTrade, Trade: trade()}},
		{"trade/sell at price 0", trSubj, tradeBody().with("side", "sell").with("price", 0).json(),
			&Update{Kind: KindTrade, Trade: func() *store.Trade { tr := trade(); tr.Side, tr.Price = "sell", 0; return tr }()}},
		{"trade/price 1, tiny size", trSubj, tradeBody().with("price", 1).with("size", 1e-9).json(),
			&Update{Kind: KindTrade, Trade: func() *store.Trade { tr := trade(); tr.Price, tr.Size = 1, 1e-9; return tr }()}},
		{"trade/offset converted to UTC", trSubj, tradeBody().with("ts", "2026-01-02T12:00:03.000001+02:00").json(),
			&Update{Kind: KindTrade, Trade: trade()}},
		{"trade/unknown fields ignored", trSubj,
			tradeBody().with("fee", 0.01).with("maker", body{"id": "m"}).with("version", 0).json(),
			&Update{Kind: KindTrade, Trade: trade()}},
		// Text limits count characters (runes), not bytes: exactly at the
		// limit passes, in ASCII and in 2-, 3- and 4-byte UTF-8.
		{"event/title of 300 ASCII characters", evSubj, eventBody().with("title", strings.Repeat("a", 300)).json(),
			&Update{Kind: KindEvent, Event: func() *store.Event { e := event(); e.Title = strings.Repeat("a", 300); return e }()}},
		{"event/title of 300 characters in 1200 bytes", evSubj, eventBody().with("title", strings.Repeat("😀", 300)).json(),
			&Update{Kind: KindEvent, Event: func() *store.Event { e := event(); e.Title = strings.Repeat("😀", 300); return e }()}},
		{"market/title of 300 characters in 900 bytes", mkSubj, marketBody().with("title", strings.Repeat("語", 300)).json(),
			&Update{Kind: KindMarket, Market: func() *store.Market { m := market(); m.Title = strings.Repeat("語", 300); return m }()}},
		{"market/result of 64 characters in 128 bytes", mkSubj,
			marketBody().with("status", "resolved").with("resolved_at", "2026-01-03T00:00:00Z").with("result", strings.Repeat("é", 64)).json(),
			&Update{Kind: KindMarket, Market: func() *store.Market {
				m := market()
				m.Status, m.ResolvedAt, m.Result = "resolved", ptr(utc(2026, 1, 3, 0, 0, 0, 0)), ptr(strings.Repeat("é", 64))
				return m
			}()}},
		{"trade/whitespace around the object", trSubj, append(append([]byte(" \n\t"), tradeBody().json()...), "\r\n "...),
			&Update{Kind: KindTrade, Trade: trade()}},
	}
	return append(cases, matchValidCases()...)
}

func TestDecodeValid(t *testing.T) {
	for _, c := range validCases() {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(testPrefix, c.subject, c.data)
			if err != nil {
				t.Fatalf("Decode(%q, %s): got error %v, want nil", c.subject, c.data, err)
			}
			checkUpdate(t, got, c.want)
			if gotKey, wantKey := got.Key(), c.want.Key(); gotKey != wantKey {
				t.Errorf("Key(): got %q, want %q", gotKey, wantKey)
			}
		})
	}
}

// TestDecodeNanoseconds pins the fraction to the microsecond, what Postgres
// stores: the cache and a rebuild must render the same instant.
func TestDecodeNanoseconds(t *testing.T) {
	u, err := Decode(testPrefix, subjectOf(KindTrade, "mk-1"), tradeBody().with("ts", "2026-01-02T10:00:03.987654321Z").json())
	if err != nil {
		t.Fatalf("Decode: got error %v, want nil", err)
	}
	if got, want := u.Trade.TS.Nanosecond(), 987654000; got != want {
		t.Errorf("ts nanoseconds: got %d, want %d", got, want)
	}
	if got, want := u.Trade.TS.Format(time.RFC3339Nano), "2026-01-02T10:00:03.987654Z"; got != want {
		t.Errorf("ts: got %s, want %s", got, want)
	}
}

func checkUpdate(t *testing.T, got, want *Update) {
	t.Helper()
	if got == nil {
		t.Fatalf("update: got nil, want kind %s", want.Kind)
	}
	if got.Kind != want.Kind {
		t.Errorf("Kind: got %q, want %q", got.Kind, want.Kind)
	}
	if gotSet, wantSet := entities(got), entities(want); gotSet != wantSet {
		t.Fatalf("entities set: got %s, want %s", gotSet, wantSet)
	}
	switch {
	case want.Event != nil:
		checkEvent(t, got.Event, want.Event)
	case want.Market != nil:
		checkMarket(t, got.Market, want.Market)
	case want.Price != nil:
		checkPrice(t, got.Price, want.Price)
	case want.Trade != nil:
		checkTrade(t, got.Trade, want.Trade)
	}
}

// entities names the entity fields an update has set.
func entities(u *Update) string {
	var s []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"event", u.Event != nil}, {"market", u.Market != nil}, {"price", u.Price != nil}, {"trade", u.Trade != nil}} {
		if f.set {
			s = append(s, f.name)
		}
	}
	return "[" + strings.Join(s, " ") + "]"
}

func show[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	if s, ok := any(*p).(string); ok {
		return strconv.Quote(s)
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

func checkField[T comparable](t *testing.T, name string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", name, got, want)
	}
}

func checkTime(t *testing.T, name string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s: got %s, want %s", name, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if got.Location() != time.UTC {
		t.Errorf("%s location: got %v, want UTC", name, got.Location())
	}
}

func checkEvent(t *testing.T, got, want *store.Event) {
	t.Helper()
	checkField(t, "ID", got.ID, want.ID)
	checkField(t, "Version", got.Version, want.Version)
	checkField(t, "Title", got.Title, want.Title)
	checkField(t, "Category", got.Category, want.Category)
	checkField(t, "Status", got.Status, want.Status)
	checkField(t, "MergedInto", show(got.MergedInto), show(want.MergedInto))
	for i := range want.VenueIDs {
		checkField(t, store.EventVenueFields[i], show(got.VenueIDs[i]), show(want.VenueIDs[i]))
	}
	checkField(t, "Volume", got.Volume, want.Volume)
	checkTime(t, "UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkMatches(t, got.Matches, want.Matches)
}

func checkMarket(t *testing.T, got, want *store.Market) {
	t.Helper()
	checkField(t, "ID", got.ID, want.ID)
	checkField(t, "EventID", got.EventID, want.EventID)
	checkField(t, "Version", got.Version, want.Version)
	checkField(t, "Title", got.Title, want.Title)
	checkField(t, "Status", got.Status, want.Status)
	if !maps.Equal(got.Venues, want.Venues) || got.Venues == nil {
		t.Errorf("Venues: got %v, want %v", got.Venues, want.Venues)
	}
	checkField(t, "Result", show(got.Result), show(want.Result))
	switch {
	case got.ResolvedAt == nil || want.ResolvedAt == nil:
		checkField(t, "ResolvedAt is nil", got.ResolvedAt == nil, want.ResolvedAt == nil)
	default:
		checkTime(t, "ResolvedAt", *got.ResolvedAt, *want.ResolvedAt)
	}
	checkTime(t, "UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkMatches(t, got.Matches, want.Matches)
}

func checkPrice(t *testing.T, got, want *store.Price) {
	t.Helper()
	checkField(t, "MarketID", got.MarketID, want.MarketID)
	checkField(t, "Version", got.Version, want.Version)
	checkTime(t, "TS", got.TS, want.TS)
	if got.Quotes == nil || len(got.Quotes) != len(want.Quotes) {
		t.Errorf("Quotes: got %d venues %v, want %d", len(got.Quotes), got.Quotes, len(want.Quotes))
	}
	for venue, w := range want.Quotes {
		g, ok := got.Quotes[venue]
		if !ok {
			t.Errorf("Quotes[%s]: missing", venue)
			continue
		}
		checkField(t, "Quotes["+venue+"].Bid", show(g.Bid), show(w.Bid))
		checkField(t, "Quotes["+venue+"].Ask", show(g.Ask), show(w.Ask))
		checkField(t, "Quotes["+venue+"].Last", show(g.Last), show(w.Last))
		checkField(t, "Quotes["+venue+"].Volume24h", g.Volume24h, w.Volume24h)
	}
}

func checkTrade(t *testing.T, got, want *store.Trade) {
	t.Helper()
	checkField(t, "MarketID", got.MarketID, want.MarketID)
	checkField(t, "TradeID", got.TradeID, want.TradeID)
	checkField(t, "Venue", got.Venue, want.Venue)
	checkField(t, "Price", got.Price, want.Price)
	checkField(t, "Size", got.Size, want.Size)
	checkField(t, "Side", got.Side, want.Side)
	checkTime(t, "TS", got.TS, want.TS)
}

type invalidCase struct {
	name    string
	subject string
	data    []byte
	code    string
	field   string // must appear in Error(); empty when the message has no field to name
}

// kindSpec describes one message kind for the generated invalid cases.
type kindSpec struct {
	kind     string
	id       string // the subject's id
	body     func() body
	idField  string // the body field that must equal the subject's id
	required []string
	times    []string
}

var kindSpecs = []kindSpec{
	{KindEvent, "ev-1", eventBody, "universal_id",
		[]string{"universal_id", "version", "title", "category", "status", "volume", "updated_at"}, []string{"updated_at"}},
	{KindMarket, "mk-1", marketBody, "universal_id",
		[]string{"universal_id", "event_id", "version", "title", "status", "venues", "updated_at"}, []string{"updated_at"}},
	{KindPrice, "mk-1", priceBody, "market_id", []string{"market_id", "version", "ts", "quotes"}, []string{"ts"}},
	{KindTrade, "mk-1", tradeBody, "market_id",
		[]string{"market_id", "trade_id", "venue", "price", "size", "side", "ts"}, []string{"ts"}},
}

var (
	badIDs = map[string]string{
		"65 chars": strings.Repeat("a", 65), "dot": "a.b", "space": "a b", "empty": "",
		"slash": "a/b", "non-ASCII": "évent",
	}
	badTimes = map[string]string{
		"space separator": "2026-01-02 10:00:00", "word": "yesterday", "month 13": "2026-13-01T00:00:00Z",
		"empty": "", "no offset": "2026-01-02T10:00:00", "day 30 of February": "2026-02-30T00:00:00Z",
		"hour 24": "2026-01-02T24:00:00Z", "offset without colon": "2026-01-02T10:00:00+0200",
		"comma fraction": "2026-01-02T10:00:00,5Z", "one-digit hour": "2026-01-02T1:00:00Z",
		"offset hour 24": "2026-01-02T10:00:00+24:00", "offset minute 60": "2026-01-02T10:00:00+23:60",
		"year 10000 in UTC": "9999-12-31T23:59:59-01:00", "year 0 in UTC": "0001-01-01T00:30:00+01:00",
		"zero time": "0001-01-01T00:00:00Z", "unix seconds as text": "1767348000",
	}
	badCategories = map[string]string{
		"uppercase": "Politics", "33 chars": strings.Repeat("a", 33), "underscore": "us_politics",
		"empty": "", "space": "us politics",
	}
)

// sorted yields m in key order, so that cases (and fuzz seed numbers) keep
// their order from run to run.
func sorted(m map[string]string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

func invalidCases() []invalidCase {
	var cs []invalidCase
	add := func(name, subject string, data []byte, code, field string) {
		cs = append(cs, invalidCase{name, subject, data, code, field})
	}
	for _, k := range kindSpecs {
		subj := subjectOf(k.kind, k.id)
		n := k.kind + "/"
		valid := k.body().json()
		for name, data := range sorted(map[string]string{
			"bad json/unterminated": `{"version": 1`, "bad json/not json": "not json", "bad json/empty body": "",
			"bad json/single quotes": `{'version': 1}`, "body/array": `[` + string(valid) + `]`, "body/string": `"hello"`,
			"body/null": "null", "body/number": "42", "body/true": "true",
			"trailing/word": string(valid) + " x", "trailing/brace": string(valid) + "}",
			"trailing/second object": string(valid) + "{}", "trailing/comma": string(valid) + ",",
		}) {
			add(n+name, subj, []byte(data), ReasonBadJSON, "")
		}
		for _, f := range k.required {
			add(n+"missing "+f, subj, k.body().without(f).json(), ReasonMissingField, f)
			add(n+"null "+f, subj, k.body().with(f, nil).json(), ReasonMissingField, f)
		}
		if k.kind != KindTrade { // trades are immutable and carry no version
			for _, v := range []any{0, -3} {
				add(n+"version "+show(&v), subj, k.body().with("version", v).json(), ReasonInvalidVersion, "version")
			}
			for _, v := range []any{1.5, "1", 1e30, true} {
				add(n+"version "+show(&v), subj, k.body().with("version", v).json(), ReasonInvalidField, "version")
			}
		}
		for name, v := range sorted(badIDs) {
			add(n+k.idField+" "+name, subj, k.body().with(k.idField, v).json(), ReasonInvalidID, k.idField)
		}
		add(n+"subject id differs", subjectOf(k.kind, "other"), k.body().json(), ReasonSubject, k.idField)
		add(n+"subject id differs in case", subjectOf(k.kind, strings.ToUpper(k.id)), k.body().json(), ReasonSubject, k.idField)
		for _, f := range k.times {
			for name, v := range sorted(badTimes) {
				add(n+f+" "+name, subj, k.body().with(f, v).json(), ReasonInvalidTime, f)
			}
			add(n+f+" as a number", subj, k.body().with(f, 1767348000).json(), ReasonInvalidField, f)
		}
	}

	ev, mk := subjectOf(KindEvent, "ev-1"), subjectOf(KindMarket, "mk-1")
	pr, tr := subjectOf(KindPrice, "mk-1"), subjectOf(KindTrade, "mk-1")

	for name, v := range sorted(badCategories) {
		add("event/category "+name, ev, eventBody().with("category", v).json(), ReasonInvalidCategory, "category")
	}
	for _, v := range []string{"closed", "Active", "", "paused"} {
		add("event/status "+strconv.Quote(v), ev, eventBody().with("status", v).json(), ReasonInvalidStatus, "status")
	}
	add("event/merged without merged_into", ev, eventBody().with("status", "merged").without("merged_into").json(), ReasonMissingField, "merged_into")
	add("event/merged with null merged_into", ev, eventBody().with("status", "merged").json(), ReasonMissingField, "merged_into")
	for name, v := range sorted(badIDs) {
		add("event/merged_into "+name, ev, eventBody().with("status", "merged").with("merged_into", v).json(), ReasonInvalidID, "merged_into")
	}
	for _, f := range store.EventVenueFields {
		add("event/"+f+" dot", ev, eventBody().with(f, "a.b").json(), ReasonInvalidID, f)
		add("event/"+f+" empty", ev, eventBody().with(f, "").json(), ReasonInvalidID, f)
		add("event/"+f+" a number", ev, eventBody().with(f, 5).json(), ReasonInvalidField, f)
	}
	add("event/negative volume", ev, eventBody().with("volume", -1).json(), ReasonInvalidVolume, "volume")
	add("event/title a number", ev, eventBody().with("title", 5).json(), ReasonInvalidField, "title")

	for name, v := range sorted(badIDs) {
		add("market/event_id "+name, mk, marketBody().with("event_id", v).json(), ReasonInvalidID, "event_id")
	}
	for _, v := range []string{"merged", "closed", "RESOLVED", ""} {
		add("market/status "+strconv.Quote(v), mk, marketBody().with("status", v).json(), ReasonInvalidStatus, "status")
	}
	for _, v := range []string{"venue_e", "VENUE_A", "venue", ""} {
		add("market/venues key "+strconv.Quote(v), mk, marketBody().with("venues."+v, "x-1").json(), ReasonInvalidVenue, "venue")
	}
	add("market/venues value dot", mk, marketBody().with("venues.venue_a", "a.b").json(), ReasonInvalidID, "venues.venue_a")
	add("market/venues value empty", mk, marketBody().with("venues.venue_b", "").json(), ReasonInvalidID, "venues.venue_b")
	add("market/venues an array", mk, marketBody().with("venues", []string{"venue_a"}).json(), ReasonInvalidField, "venues")
	add("market/venues value a number", mk, marketBody().with("venues.venue_a", 5).json(), ReasonInvalidField, "venues")
	resolved := func() body {
		return marketBody().with("status", "resolved").with("resolved_at", "2026-01-03T00:00:00Z").with("result", "yes")
	}
	add("market/resolved without resolved_at", mk, resolved().without("resolved_at").json(), ReasonMissingField, "resolved_at")
	add("market/resolved with null resolved_at", mk, resolved().with("resolved_at", nil).json(), ReasonMissingField, "resolved_at")
	add("market/resolved without result", mk, resolved().without("result").json(), ReasonMissingField, "result")
	add("market/resolved with null result", mk, resolved().with("result", nil).json(), ReasonMissingField, "result")
	add("market/result a number", mk, resolved().with("result", 1).json(), ReasonInvalidField, "result")
	for name, v := range sorted(map[string]string{"301 ASCII": strings.Repeat("a", 301), "301 of 2 bytes": strings.Repeat("é", 301),
		"301 of 4 bytes": strings.Repeat("😀", 301), "900 KB": strings.Repeat("x", 900_000)}) {
		add("event/title "+name, ev, eventBody().with("title", v).json(), ReasonTextTooLong, "title")
		add("market/title "+name, mk, marketBody().with("title", v).json(), ReasonTextTooLong, "title")
	}
	for name, v := range sorted(map[string]string{"65 ASCII": strings.Repeat("y", 65), "65 of 3 bytes": strings.Repeat("語", 65)}) {
		add("market/result "+name, mk, resolved().with("result", v).json(), ReasonTextTooLong, "result")
		add("market/result of an active market "+name, mk, marketBody().with("result", v).json(), ReasonTextTooLong, "result")
	}
	for name, v := range sorted(badTimes) {
		add("market/resolved_at "+name, mk, resolved().with("resolved_at", v).json(), ReasonInvalidTime, "resolved_at")
	}

	for _, v := range []string{"venue_x", "Venue_a", ""} {
		add("price/quotes key "+strconv.Quote(v), pr, priceBody().with("quotes."+v, body{"bid": 0.5, "volume_24h": 1}).json(), ReasonInvalidVenue, "venue")
	}
	for _, f := range []string{"bid", "ask", "last"} {
		for _, v := range []float64{-0.01, 1.01, 100} {
			add("price/"+f+" "+strconv.FormatFloat(v, 'g', -1, 64), pr, priceBody().with("quotes.venue_a."+f, v).json(), ReasonPriceRange, "quotes.venue_a."+f)
		}
		add("price/"+f+" a string", pr, priceBody().with("quotes.venue_a."+f, "0.5").json(), ReasonInvalidField, f)
	}
	add("price/missing volume_24h", pr, priceBody().without("quotes.venue_b.volume_24h").json(), ReasonMissingField, "volume_24h")
	add("price/null quote", pr, priceBody().with("quotes.venue_b", nil).json(), ReasonMissingField, "volume_24h")
	add("price/negative volume_24h", pr, priceBody().with("quotes.venue_a.volume_24h", -5).json(), ReasonInvalidVolume, "volume_24h")
	add("price/quotes an array", pr, priceBody().with("quotes", []int{1}).json(), ReasonInvalidField, "quotes")

	for name, v := range sorted(badIDs) {
		add("trade/trade_id "+name, tr, tradeBody().with("trade_id", v).json(), ReasonInvalidID, "trade_id")
	}
	for _, v := range []string{"venue_e", "VENUE_C", "", "venue_c "} {
		add("trade/venue "+strconv.Quote(v), tr, tradeBody().with("venue", v).json(), ReasonInvalidVenue, "venue")
	}
	for _, v := range []float64{-0.01, 1.01, -1e-300} {
		add("trade/price "+strconv.FormatFloat(v, 'g', -1, 64), tr, tradeBody().with("price", v).json(), ReasonPriceRange, "price")
	}
	for _, v := range []float64{0, -1, -1e-9} {
		add("trade/size "+strconv.FormatFloat(v, 'g', -1, 64), tr, tradeBody().with("size", v).json(), ReasonInvalidSize, "size")
	}
	for _, v := range []string{"hold", "BUY", "", "sell "} {
		add("trade/side "+strconv.Quote(v), tr, tradeBody().with("side", v).json(), ReasonInvalidSide, "side")
	}
	add("trade/price a string", tr, tradeBody().with("price", "0.5").json(), ReasonInvalidField, "price")
	add("trade/size a string", tr, tradeBody().with("size", "1").json(), ReasonInvalidField, "size")

	add("subject/unknown kind", subjectOf("order", "mk-1"), tradeBody().json(), ReasonSubject, "order")
	add("subject/other prefix", "md.v2.trade.mk-1", tradeBody().json(), ReasonSubject, "md.v2.trade.mk-1")
	add("subject/no id", testPrefix+".trade", tradeBody().json(), ReasonSubject, "")
	add("subject/extra token", subjectOf(KindTrade, "mk-1.x"), tradeBody().json(), ReasonSubject, "mk-1.x")
	add("subject/id too long", subjectOf(KindTrade, strings.Repeat("m", 65)), tradeBody().json(), ReasonSubject, "")
	return append(cs, matchInvalidCases()...)
}

func TestDecodeInvalid(t *testing.T) {
	for _, c := range invalidCases() {
		t.Run(c.name, func(t *testing.T) {
			u, err := Decode(testPrefix, c.subject, c.data)
			checkInvalid(t, err, c.code, c.field)
			if u == nil {
				t.Fatal("update: got nil, want the kind of the subject")
			}
			if got := entities(u); got != "[]" {
				t.Errorf("entities set: got %s, want none", got)
			}
			wantKind, _, _ := ParseSubject(testPrefix, c.subject)
			if u.Kind != wantKind {
				t.Errorf("Kind: got %q, want %q", u.Kind, wantKind)
			}
		})
	}
}

// TestDecodeInvalidCodes checks that the generated cases cover every code the
// validator can give, so a new code cannot go untested.
func TestDecodeInvalidCodes(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range invalidCases() {
		covered[c.code] = true
	}
	for _, code := range decodeCodes {
		if !covered[code] {
			t.Errorf("code %s: no invalid case", code)
		}
	}
}

func checkInvalid(t *testing.T, err error, code, field string) {
	t.Helper()
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("error: got %v (%T), want *InvalidError with code %s", err, err, code)
	}
	if ie.Code != code {
		t.Errorf("code: got %q (%v), want %q", ie.Code, err, code)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("Error(): got %q, want it to name %q", err.Error(), field)
	}
}

func TestParseSubject(t *testing.T) {
	cases := []struct {
		subject  string
		kind, id string
		wantErr  bool
	}{
		{testPrefix + ".event.ev-1", KindEvent, "ev-1", false},
		{testPrefix + ".market.mk_1", KindMarket, "mk_1", false},
		{testPrefix + ".price.MK-1", KindPrice, "MK-1", false},
		{testPrefix + ".trade." + strings.Repeat("t", 64), KindTrade, strings.Repeat("t", 64), false},
		{testPrefix + ".trade." + strings.Repeat("t", 65), KindTrade, "", true},
		{testPrefix + ".event", KindEvent, "", true},
		{testPrefix + ".event.", KindEvent, "", true},
		{testPrefix + ".event.a.b", KindEvent, "", true},
		{testPrefix + ".order.x", "unknown", "", true},
		{testPrefix + ".Event.x", "unknown", "", true},
		{testPrefix + ".", "unknown", "", true},
		{testPrefix, "unknown", "", true},
		{"md.v2.event.x", "unknown", "", true},
		{testPrefix + "event.x", "unknown", "", true},
		{"", "unknown", "", true},
	}
	for _, c := range cases {
		t.Run(c.subject, func(t *testing.T) {
			kind, id, err := ParseSubject(testPrefix, c.subject)
			if kind != c.kind || id != c.id {
				t.Errorf("kind, id: got %q, %q, want %q, %q", kind, id, c.kind, c.id)
			}
			if !c.wantErr {
				if err != nil {
					t.Errorf("error: got %v, want nil", err)
				}
				return
			}
			checkInvalid(t, err, ReasonSubject, "")
		})
	}
}

// TestDecodeNUL refuses text that Postgres cannot store, instead of failing
// the whole batch at commit.
func TestDecodeNUL(t *testing.T) {
	for _, tc := range []struct {
		name, subject string
		data          []byte
	}{
		{"event title", subjectOf(KindEvent, "ev-1"), eventBody().with("title", "a\u0000b").json()},
		{"market title", subjectOf(KindMarket, "mk-1"), marketBody().with("title", "a\u0000b").json()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(testPrefix, tc.subject, tc.data)
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Code != ReasonInvalidField {
				t.Fatalf("got %v, want invalid_field", err)
			}
		})
	}
}

// TestDecodeNegativeZero: -0 is stored, cached and rebuilt as 0.
func TestDecodeNegativeZero(t *testing.T) {
	u, err := Decode(testPrefix, subjectOf(KindTrade, "mk-1"), tradeBody().with("price", json.RawMessage("-0")).json())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(u.Trade.Price); string(b) != "0" {
		t.Errorf("trade price -0: got %s, want 0", b)
	}
}
