package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// Key reads the calling key: its scopes, expiry and the account's limit
// per window (GET /public/v1/key; no scope needed).
func (c *Client) Key(ctx context.Context) (*Key, error) {
	var k Key
	if _, err := c.do(ctx, "/key", nil, "", &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// Event reads one event with its active and recently resolved markets. An
// event merged into another answers a 404 *Error whose MergedInto names
// the event to read instead. An id that is not a universal id
// ([A-Za-z0-9_-]{1,64}) is an error wrapping ErrInvalidID, and nothing is
// sent.
func (c *Client) Event(ctx context.Context, universalID string) (*EventDetail, error) {
	if err := checkID("Event", universalID); err != nil {
		return nil, err
	}
	var e EventDetail
	if _, err := c.do(ctx, "/events/"+url.PathEscape(universalID), nil, "", &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Search returns the served active events whose titles start with q
// (case-insensitive) and then those containing it, each group by volume;
// an empty q ranks every event by volume. limit is 1–50; 0 means the
// server's default (20). There is no cursor: only the top results.
func (c *Client) Search(ctx context.Context, q string, limit int) ([]Event, error) {
	return c.SearchWith(ctx, SearchQuery{Q: q, Limit: limit})
}

// SearchQuery is a search with every parameter /markets/search takes. Zero
// values leave a parameter out.
type SearchQuery struct {
	// Q is the text titles start with or contain; "" ranks every event.
	Q string
	// Limit is 1–50 (0: the server's default, 20).
	Limit int
	// MinConfidence and Relation keep the events whose venue links the
	// matcher is sure enough of, as EventsFilter's do.
	MinConfidence *float64
	Relation      string
}

// SearchWith is Search with the match filters (SearchQuery).
func (c *Client) SearchWith(ctx context.Context, sq SearchQuery) ([]Event, error) {
	query := url.Values{"q": {sq.Q}}
	setInt(query, "limit", sq.Limit)
	setFloat(query, "min_confidence", sq.MinConfidence)
	setString(query, "relation", sq.Relation)
	var l list[Event]
	if _, err := c.do(ctx, "/markets/search", query, "", &l); err != nil {
		return nil, err
	}
	return nonNil(l.Data), nil
}

// Trades returns a market's latest trades, newest first. limit is 1–200;
// 0 means the server's default (50). There is no cursor. A marketID that
// is not a universal id is an error wrapping ErrInvalidID, and nothing is
// sent.
func (c *Client) Trades(ctx context.Context, marketID string, limit int) ([]Trade, error) {
	if err := checkID("Trades", marketID); err != nil {
		return nil, err
	}
	query := url.Values{}
	setInt(query, "limit", limit)
	var l list[Trade]
	if _, err := c.do(ctx, "/markets/"+url.PathEscape(marketID)+"/trades", query, "", &l); err != nil {
		return nil, err
	}
	return nonNil(l.Data), nil
}

// EventsFilter selects the events Events walks. Zero values leave a filter
// out.
type EventsFilter struct {
	// Category keeps the events of one category.
	Category string
	// Venue keeps the events that have an id on that venue (VenueA, …).
	Venue string
	// MinVenues keeps the events with ids on at least that many venues
	// (1–4; every served event has 2).
	MinVenues int
	// MinConfidence keeps the events whose every venue link (each venue
	// the event has an id on) carries match metadata at least this sure,
	// 0–1 (Confidence makes one); nil leaves it out. A link without
	// metadata passes only 0, which the server takes as no filter: the
	// pointer lets 0 be sent all the same.
	MinConfidence *float64
	// Relation keeps the events whose every venue link has this relation;
	// the server takes RelationIdentity only.
	Relation string
	// Limit is the page size, 1–100 (0: the server's default, 50). It
	// does not bound the walk: break out of the loop for that.
	Limit int
}

// Confidence returns a pointer to v, for EventsFilter.MinConfidence and
// SearchQuery.MinConfidence.
func Confidence(v float64) *float64 { return &v }

// Events walks the active events in ascending universal_id order, page by
// page, until the last page or until the loop breaks. An error ends the
// walk: it is yielded once, with a zero Event. An event that becomes
// active or resolves during the walk may or may not be yielded. With the
// match filters a page may hold fewer events than Limit, or none, and the
// walk goes on to the next: only the server's null cursor ends it.
//
//	for ev, err := range c.Events(ctx, client.EventsFilter{Category: "politics"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(ev.UniversalID, ev.Title)
//	}
func (c *Client) Events(ctx context.Context, f EventsFilter) iter.Seq2[Event, error] {
	query := url.Values{}
	setString(query, "category", f.Category)
	setString(query, "venue", f.Venue)
	setInt(query, "min_venues", f.MinVenues)
	setFloat(query, "min_confidence", f.MinConfidence)
	setString(query, "relation", f.Relation)
	setInt(query, "limit", f.Limit)
	return walk[Event](ctx, c, "/events", query)
}

// VenueKey is a venue's own id of an event: the venue (VenueA, …) and the
// id the venue gives it.
type VenueKey struct {
	Venue, ID string
}

// VenueIndex walks every active event once and maps each venue's own event
// id to the event's universal id: the interface's stated way to go from a
// venue's id to ours (there is no lookup by venue id). It holds event ids
// only; a market's venue ids are in its event's read (Event), one call
// per event. Should two events carry the same venue id (the matcher moved
// it during the walk), the one later in universal_id order wins.
func (c *Client) VenueIndex(ctx context.Context) (map[VenueKey]string, error) {
	index := make(map[VenueKey]string)
	for ev, err := range c.Events(ctx, EventsFilter{Limit: 100}) {
		if err != nil {
			return nil, err
		}
		for venue, id := range ev.VenueIDs() {
			index[VenueKey{Venue: venue, ID: id}] = ev.UniversalID
		}
	}
	return index, nil
}

// AccountKeysFilter selects the keys AccountKeys walks.
type AccountKeysFilter struct {
	// Status is "active", "revoked" or "expired"; "" lists all.
	Status string
	// Limit is the page size, 1–100 (0: the server's default, 50).
	Limit int
}

// AccountKeys walks the keys of the caller's account in ascending key_id
// order (scope account:read), like Events.
func (c *Client) AccountKeys(ctx context.Context, f AccountKeysFilter) iter.Seq2[AccountKey, error] {
	query := url.Values{}
	setString(query, "status", f.Status)
	setInt(query, "limit", f.Limit)
	return walk[AccountKey](ctx, c, "/account/keys", query)
}

// UsageFilter selects the rows Usage walks.
type UsageFilter struct {
	// Route keeps one route: key, events, event, search, snapshot, trades,
	// account_keys, account_usage or stream.
	Route string
	// From and To are the first and last UTC day (only their UTC date
	// counts); zero values mean the server's defaults, 30 days ago and
	// today. The range may span at most 366 days.
	From, To time.Time
	// Limit is the page size, 1–100 (0: the server's default, 50).
	Limit int
}

// Usage walks the account's request counts per UTC day and route,
// ascending by date and then route (scope account:read), like Events.
func (c *Client) Usage(ctx context.Context, f UsageFilter) iter.Seq2[UsageRow, error] {
	query := url.Values{}
	setString(query, "route", f.Route)
	setDate(query, "from", f.From)
	setDate(query, "to", f.To)
	setInt(query, "limit", f.Limit)
	return walk[UsageRow](ctx, c, "/account/usage", query)
}

// walk yields the items of a cursor-paged route, following next_cursor.
func walk[T any](ctx context.Context, c *Client, path string, query url.Values) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		for {
			var p page[T]
			if _, err := c.do(ctx, path, q, "", &p); err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range p.Data {
				if !yield(item, nil) {
					return
				}
			}
			if p.NextCursor == nil || *p.NextCursor == "" {
				return
			}
			q.Set("cursor", *p.NextCursor)
		}
	}
}

// setInt sets a positive integer parameter; 0 leaves it to the server.
// A negative value is sent as it is, for the server to refuse (422).
func setInt(q url.Values, name string, v int) {
	if v != 0 {
		q.Set(name, strconv.Itoa(v))
	}
}

// setFloat sets a number parameter in the shortest form that reads back
// as the same float64; nil leaves it out. A value out of range (NaN too)
// is sent as it is, for the server to refuse (422).
func setFloat(q url.Values, name string, v *float64) {
	if v != nil {
		q.Set(name, strconv.FormatFloat(*v, 'g', -1, 64))
	}
}

// setString sets a string parameter; "" leaves it out.
func setString(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

// setDate sets a day parameter to t's UTC date; the zero time leaves it to
// the server.
func setDate(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.DateOnly))
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ErrInvalidID is wrapped by the error of a method given an id that is not
// a universal id: [A-Za-z0-9_-]{1,64}, the pattern of every event and
// market id (contract §4). Such an id is refused before anything is sent
// (in a URL path, "../key" would name another route; in a snapshot's ids,
// "a,b" would be two), so errors.Is(err, ErrInvalidID) finds it and
// errors.As finds no *Error: no answer came. Event, Trades, Candles, Snapshot,
// NewPoller, Stream and (*Stream).Subscribe check their ids.
var ErrInvalidID = errors.New("not a universal id ([A-Za-z0-9_-]{1,64})")

// checkID refuses an id that is not a universal id; method names the
// caller in the error.
func checkID(method, id string) error {
	if validID(id) {
		return nil
	}
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return fmt.Errorf("client: %s: %q: %w", method, id, ErrInvalidID)
}

// checkIDs is checkID of every id.
func checkIDs(method string, ids []string) error {
	for _, id := range ids {
		if err := checkID(method, id); err != nil {
			return err
		}
	}
	return nil
}
