package api

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// getEvent answers GET /events/{universal_id}.
func (s *Server) getEvent(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	if err := s.admit(c); err != nil {
		return err
	}
	if !store.ValidID(id) {
		return fail(KindNotFound, "no event has this id")
	}
	// Node memory answers without a round trip unless the client sent a
	// tag it does not hold: then Event's round trip makes sure this node is
	// not behind the one that gave the tag (contract §2, order).
	ev, held := s.reader.EventHeld(id)
	if inm := c.Get(fiber.HeaderIfNoneMatch); held && inm != "" && (ev.Body == nil || !etagMatches(inm, bodyTag(ev.Body))) {
		held = false
	}
	var err error
	if !held {
		ev, err = s.reader.Event(c.UserContext(), id)
	}
	switch {
	case err != nil:
		return readFailed(err)
	case ev.Body != nil:
		return send(c, ev.Body)
	case ev.MergedInto != "":
		return &Error{Kind: KindNotFound, Message: "the event was merged into " + ev.MergedInto, MergedInto: ev.MergedInto}
	default:
		return fail(KindNotFound, "no served event has this id")
	}
}

// listEvents answers GET /events: a page of active served events in
// ascending id order, walked with a cursor.
func (s *Server) listEvents(c *fiber.Ctx) error {
	q, perr := parseListQuery(param(c, "limit"), param(c, "category"), param(c, "venue"), param(c, "min_venues"),
		param(c, "min_confidence"), param(c, "relation"), c.Query("cursor"))
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
	// One more than the page shows: whether it is there says if a next
	// page exists. Node memory answers with no round trip (rendered once
	// per account), unless the client sent a tag it does not match (see
	// getEvent); else the read's round trip is on its way while the
	// admission's is: see read.go.
	ctx := c.UserContext()
	if perr == nil {
		if pg, held := s.reader.PageHeld(q.filter, after, q.limit+1); held {
			if err := s.admit(c); err != nil {
				return err
			}
			r := pg.Rendered(cred.Account.ID+"\x00"+binding.filters+"\x00"+strconv.Itoa(q.limit), func() cache.Rendered {
				var b bytes.Buffer
				s.writePage(bufferBody{&b}, pg, q.limit, binding)
				return cache.Rendered{Body: b.Bytes(), Tag: bodyTag(b.Bytes())}
			})
			if inm := c.Get(fiber.HeaderIfNoneMatch); inm == "" || etagMatches(inm, r.Tag) {
				return sendTagged(c, r.Body, r.Tag)
			}
			read := s.reader.BeginPage(ctx, q.filter, after, q.limit+1)
			return s.sendPage(c, read, q.limit, binding)
		}
	}
	var read *cache.PageRead
	if perr == nil {
		read = s.reader.BeginPage(ctx, q.filter, after, q.limit+1)
	}
	if err := s.admitBegun(c, read, perr); err != nil {
		return err
	}
	return s.sendPage(c, read, q.limit, binding)
}

// sendPage finishes a page read and answers it.
func (s *Server) sendPage(c *fiber.Ctx, read *cache.PageRead, limit int, binding cursorBinding) error {
	pg, err := read.Finish(c.UserContext())
	if err != nil {
		return readFailed(err)
	}
	c.Response().ResetBody()
	s.writePage(responseBody{c.Response()}, pg, limit, binding)
	return sendWritten(c)
}

// writePage writes the answer of a page read with one more than limit ids.
// The page may be shared with other requests (node memory): read it, never
// change it. An id read without its summary (pruned by a rebuild at that
// moment) moves the cursor but is not shown. A filtered page whose read
// stopped on its scan bound (Resume) continues where the read stopped:
// it may hold fewer than limit events, none even, and still have a next
// page.
func (s *Server) writePage(w bodyWriter, pg cache.Page, limit int, binding cursorBinding) {
	ids, sums := pg.IDs, pg.Summaries
	var next []byte
	switch {
	case len(ids) > limit:
		ids, sums = ids[:limit], sums[:limit]
		next = []byte(`"` + encodeCursor(s.cfg.CursorSecret, binding, ids[len(ids)-1]) + `"`)
	case pg.Resume != "":
		next = []byte(`"` + encodeCursor(s.cfg.CursorSecret, binding, pg.Resume) + `"`)
	}
	writeList(w, sums, next, true)
}
