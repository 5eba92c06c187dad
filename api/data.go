package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// Fallback is what the data routes read from the store when Redis lacks a
// document (evicted, flushed): the answer comes from Postgres (the read
// replica) and the document is written back to Redis.
type Fallback interface {
	EventDocsByID(ctx context.Context, ids []string) ([]store.EventDoc, error)
	MarketDocsByID(ctx context.Context, ids []string) ([]store.MarketDoc, error)
	NewestTrades(ctx context.Context, marketID string, limit int) ([]store.Trade, error)
	ListedEvents(ctx context.Context, f store.ListFilter, after string, limit int) ([]store.Event, error)
}

var _ Fallback = (*store.Store)(nil)

// send answers 200 with a JSON body and its ETag (a hash of the bytes, so
// every node gives the same tag for the same data), or 304 when the
// client's If-None-Match holds that tag.
func send(c *fiber.Ctx, body []byte) error {
	if notModified(c, body) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	return c.Send(body)
}

// sendWritten is send for a body already written into the response.
func sendWritten(c *fiber.Ctx) error {
	if notModified(c, c.Response().Body()) {
		c.Response().ResetBody()
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Status(fiber.StatusOK)
	return nil
}

// notModified sets the ETag and caching headers of a 200 with body and says
// whether the client's If-None-Match holds that tag (304).
func notModified(c *fiber.Ctx, body []byte) bool {
	var tag [16]byte
	etag := strconv.AppendUint(append(tag[:0], '"'), xxhash.Sum64(body), 36)
	etag = append(etag, '"')
	h := &c.Response().Header
	h.SetBytesV(fiber.HeaderETag, etag)
	h.Set(fiber.HeaderCacheControl, "no-cache")
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" && etagMatches(inm, string(etag)) {
		return true
	}
	h.SetContentType(fiber.MIMEApplicationJSON)
	return false
}

// sentEmpty stands for a parameter sent without a value ("limit=", "venue"):
// c.Query gives "" for it as for an absent one, but an empty value is not an
// integer, a venue or a category (422), while an absent one means the default
// or no filter. It is refused like any other bad character.
const sentEmpty = "\x00"

// param is the raw value of a query parameter, or sentEmpty.
func param(c *fiber.Ctx, name string) string {
	v := c.Query(name)
	if v == "" && c.Context().QueryArgs().Has(name) {
		return sentEmpty
	}
	return v
}

func etagMatches(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == etag || t == "W/"+etag {
			return true
		}
	}
	return false
}

// repair writes documents read from the store back to Redis, in the
// background: the answer does not wait for it. Callers repair only what
// Redis answered as missing: when Redis did not answer at all, a repair
// would only wait on the dead server again. Its failures are logged at most
// once per 10 s.
func (s *Server) repair(events []store.EventDoc, markets []store.MarketDoc, trades []store.Trade) {
	select {
	case s.repairs <- struct{}{}:
	default:
		return // enough repairs in flight (Redis is slow or gone): the next read repairs
	}
	go func() {
		defer func() { <-s.repairs }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.cache.ApplyDocs(ctx, events, markets, trades); err != nil {
			s.repairWarn.Log(ctx, s.log, slog.LevelWarn, "cache repair failed", "err", err)
		}
	}()
}

func (s *Server) unavailable(err error) error {
	return &Error{Kind: KindUnavailable, Message: "the data cannot be read right now; try again", Err: err}
}

// getEvent answers GET /events/{universal_id}.
func (s *Server) getEvent(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	var cmd *redis.SliceCmd
	var fetch func(redis.Pipeliner)
	if store.ValidID(id) {
		fetch = func(p redis.Pipeliner) { cmd = s.cache.QueueEvent(p, id) }
	}
	if err := s.admit(c, fetch); err != nil {
		return err
	}
	if fetch == nil {
		return fail(KindNotFound, "no event has this id")
	}
	e, err := cache.ParseEvent(cmd)
	if err != nil || !e.Found {
		docs, ferr := s.fallback.EventDocsByID(c.UserContext(), []string{id})
		if ferr != nil {
			return s.unavailable(errors.Join(err, ferr))
		}
		d := s.cache.Rules().RenderEvent(docs[0])
		e = cache.EventEntry{Found: true, Body: d.Body, MergedInto: d.MergedInto}
		// err == nil: Redis answered, without the event.
		if docs[0].Rev > 0 && err == nil {
			s.repair(docs, nil, nil)
		}
	}
	switch {
	case e.Body != nil:
		return send(c, e.Body)
	case e.MergedInto != "":
		return &Error{Kind: KindNotFound, Message: "the event was merged into " + e.MergedInto, MergedInto: e.MergedInto}
	default:
		return fail(KindNotFound, "no served event has this id")
	}
}

// snapshot answers GET /prices/snapshot?ids=...
func (s *Server) snapshot(c *fiber.Ctx) error {
	ids, perr := parseIDs(c.Query("ids"))
	entries := make([]cache.MarketEntry, len(ids))
	// Items the node holds fresh cost nothing; only the others are read,
	// in the same round trip as the limits.
	var miss []int
	var drops []uint32
	if perr == nil {
		miss, drops = s.prices.lookup(ids, entries)
	}
	var cmds []*redis.SliceCmd
	var fetch func(redis.Pipeliner)
	if len(miss) > 0 {
		cmds = make([]*redis.SliceCmd, len(miss))
		fetch = func(p redis.Pipeliner) {
			for j, i := range miss {
				cmds[j] = s.cache.QueueMarket(p, ids[i])
			}
		}
	}
	readAt := time.Now()
	fetched, err := s.admitFetch(c, fetch)
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	var lost []string
	// absent are the lost items Redis answered as missing: only they are
	// repaired.
	var absent map[string]bool
	for j, i := range miss {
		if !fetched {
			lost = append(lost, ids[i])
			continue
		}
		e, err := cache.ParseMarket(cmds[j])
		if err != nil || !e.Found {
			lost = append(lost, ids[i])
			if err == nil {
				if absent == nil {
					absent = make(map[string]bool)
				}
				absent[ids[i]] = true
			}
			continue
		}
		entries[i] = e
		s.prices.store(ids[i], e, drops[j], readAt)
	}
	if len(lost) > 0 {
		docs, err := s.fallback.MarketDocsByID(c.UserContext(), lost)
		if err != nil {
			return s.unavailable(err)
		}
		byID := make(map[string]cache.MarketDocument, len(docs))
		var known []store.MarketDoc
		for _, d := range docs {
			byID[d.ID] = s.cache.Rules().RenderMarket(d)
			if d.Rev > 0 && absent[d.ID] {
				known = append(known, d)
			}
		}
		for i, id := range ids {
			if d, ok := byID[id]; ok && !entries[i].Found {
				entries[i] = cache.MarketEntry{Found: true, Served: d.Served, Body: d.Body}
			}
		}
		if len(known) > 0 {
			s.repair(nil, known, nil)
		}
	}
	// The answer is written straight into the response's pooled buffer:
	// a poll of 50 items is some 20 KB, not worth a fresh copy each time.
	r := c.Response()
	r.ResetBody()
	r.AppendBodyString(`{"data":[`)
	n := 0
	for _, e := range entries {
		if e.Served && e.Body != nil {
			if n > 0 {
				r.AppendBodyString(",")
			}
			r.AppendBody(e.Body)
			n++
		}
	}
	r.AppendBodyString(`],"missing":[`)
	m := 0
	for i, e := range entries {
		if !e.Served || e.Body == nil {
			if m > 0 {
				r.AppendBodyString(",")
			}
			// ids match [A-Za-z0-9_-]: nothing to escape
			r.AppendBodyString(`"`)
			r.AppendBodyString(ids[i])
			r.AppendBodyString(`"`)
			m++
		}
	}
	r.AppendBodyString(`]}`)
	return sendWritten(c)
}

// trades answers GET /markets/{universal_id}/trades.
func (s *Server) trades(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	limit, perr := parseLimit(param(c, "limit"), 50, cache.MaxTrades)
	var mcmd *redis.SliceCmd
	var tcmd *redis.StringSliceCmd
	var okcmd *redis.IntCmd
	var fetch func(redis.Pipeliner)
	if perr == nil && store.ValidID(id) {
		fetch = func(p redis.Pipeliner) {
			mcmd = s.cache.QueueMarket(p, id)
			tcmd = s.cache.QueueTrades(p, id, limit)
			okcmd = s.cache.QueueComplete(p)
		}
	}
	if err := s.admit(c, fetch); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if fetch == nil {
		return fail(KindNotFound, "no market has this id")
	}
	m, err := cache.ParseMarket(mcmd)
	// unanswered: Redis did not answer (not worth a repair), as opposed to
	// answering without the data.
	unanswered := err != nil
	// After Redis lost its data, the price item may be back before the trade
	// list (see cache.QueueComplete): read the trades from the store until
	// the listing is rebuilt.
	if complete, cerr := okcmd.Result(); err == nil && (cerr != nil || complete != 1) {
		unanswered = cerr != nil
		err = errors.Join(cerr, cache.ErrListingIncomplete)
	}
	var items [][]byte
	if err == nil && m.Found {
		if !m.Served {
			return fail(KindNotFound, "no served market has this id")
		}
		vals, terr := tcmd.Result()
		if terr != nil {
			err, unanswered = terr, true
		}
		for _, v := range vals {
			items = append(items, []byte(v))
		}
	}
	if err != nil || !m.Found {
		ctx := c.UserContext()
		docs, ferr := s.fallback.MarketDocsByID(ctx, []string{id})
		if ferr != nil {
			return s.unavailable(errors.Join(err, ferr))
		}
		if !s.cache.Rules().MarketServed(docs[0]) {
			return fail(KindNotFound, "no served market has this id")
		}
		trades, ferr := s.fallback.NewestTrades(ctx, id, cache.MaxTrades)
		if ferr != nil {
			return s.unavailable(ferr)
		}
		items = items[:0]
		for i := range trades[:min(limit, len(trades))] {
			items = append(items, cache.RenderTrade(&trades[i]))
		}
		if !unanswered {
			s.repair(nil, docs, trades)
		}
	}
	return sendList(c, items, nil, false)
}

// listBody is {"data":[items...]}, for answers kept and sent again (search).
func listBody(items [][]byte) []byte {
	var b bytes.Buffer
	writeList(&b, items, nil, false)
	return b.Bytes()
}

// sendList answers {"data":[items...]} written straight into the response's
// pooled buffer.
func sendList(c *fiber.Ctx, items [][]byte, next []byte, paged bool) error {
	c.Response().ResetBody()
	writeList(responseBody{c.Response()}, items, next, paged)
	return sendWritten(c)
}

// bodyWriter is where an answer is assembled: a buffer of its own, or the
// response's (responseBody).
type bodyWriter interface {
	Write([]byte) (int, error)
	WriteString(string) (int, error)
}

// responseBody appends to a response's body.
type responseBody struct{ r *fasthttp.Response }

func (b responseBody) Write(p []byte) (int, error)       { b.r.AppendBody(p); return len(p), nil }
func (b responseBody) WriteString(s string) (int, error) { b.r.AppendBodyString(s); return len(s), nil }

// writeList writes {"data":[items...]}, nil items left out, with
// "next_cursor" (next, or null when next is nil) when paged.
func writeList(w bodyWriter, items [][]byte, next []byte, paged bool) {
	w.WriteString(`{"data":[`) //nolint:errcheck // neither writer fails
	n := 0
	for _, it := range items {
		if it == nil {
			continue
		}
		if n > 0 {
			w.WriteString(",") //nolint:errcheck
		}
		w.Write(it) //nolint:errcheck
		n++
	}
	w.WriteString("]") //nolint:errcheck
	if paged {
		w.WriteString(`,"next_cursor":`) //nolint:errcheck
		if next == nil {
			next = []byte("null")
		}
		w.Write(next) //nolint:errcheck
	}
	w.WriteString("}") //nolint:errcheck
}

// listEvents answers GET /events: a page of active served events in
// ascending id order, walked with a cursor.
func (s *Server) listEvents(c *fiber.Ctx) error {
	q, perr := parseListQuery(param(c, "limit"), param(c, "category"), param(c, "venue"), param(c, "min_venues"), c.Query("cursor"))
	cred := credential(c)
	if cred == nil {
		return errNoCredential
	}
	binding := cursorBinding{route: "events", account: cred.Account.ID, filters: filterKey(q.filter)}
	var after string
	if perr == nil && q.cursor != "" {
		var err error
		if after, err = decodeCursor(s.cfg.CursorSecret, binding, q.cursor); err != nil {
			perr = invalidParam("cursor is malformed, altered, or was issued for other filters, another route or another account")
		}
	}
	set := cache.SetName(q.filter.Category, q.filter.Venue, minVenuesName(q.filter.MinVenues))
	key := pageKey{set: set, after: after, count: q.limit + 1}
	var cmd *redis.Cmd
	var fetch func(redis.Pipeliner)
	ids, sums, held, epoch := s.pages.lookup(key)
	if perr == nil && !held {
		fetch = func(p redis.Pipeliner) { cmd = s.cache.QueueListPage(p, set, after, key.count) }
	}
	readAt := time.Now()
	if err := s.admit(c, fetch); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !held {
		ctx := c.UserContext()
		var err error
		ids, sums, err = s.cache.ParseListPage(ctx, cmd, set, after, key.count)
		if err == nil {
			s.pages.store(key, ids, sums, epoch, readAt)
		} else {
			// The listing is not whole in Redis: read the page from the store.
			events, ferr := s.fallback.ListedEvents(ctx, q.filter, after, key.count)
			if ferr != nil {
				return s.unavailable(errors.Join(err, ferr))
			}
			ids, sums = nil, nil
			for i := range events {
				d := s.cache.Rules().RenderEvent(store.EventDoc{ID: events[i].ID, Event: &events[i]})
				ids, sums = append(ids, events[i].ID), append(sums, d.Summary)
			}
		}
	}
	// ids and sums may be shared with other requests (the node's pages):
	// read them, never change them.
	var next []byte
	if len(ids) > q.limit {
		ids, sums = ids[:q.limit], sums[:q.limit]
		next = []byte(`"` + encodeCursor(s.cfg.CursorSecret, binding, ids[len(ids)-1]) + `"`)
	}
	// An id read without its summary (pruned by a rebuild at that moment)
	// moves the cursor but is not shown.
	return sendList(c, sums, next, true)
}

func minVenuesName(n int) string {
	if n < 2 {
		return ""
	}
	return strconv.Itoa(n)
}

// search answers GET /markets/search from the node's in-memory index.
func (s *Server) searchEvents(c *fiber.Ctx) error {
	q, limit, perr := parseSearch(c.Query("q"), param(c, "limit"))
	if err := s.admit(c, nil); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !s.search.Ready() {
		return &Error{Kind: KindUnavailable, Message: "search is loading; try again"}
	}
	return send(c, s.search.answer(q, limit, listBody))
}
