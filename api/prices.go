package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
)

// snapshot answers GET /prices/snapshot?ids=...
func (s *Server) snapshot(c *fiber.Ctx) error {
	ids, perr := parseIDs(c.Query("ids")) // copies: node memory may keep them
	ctx := c.UserContext()
	// The read's round trip (the change number, the items memory lacks) is
	// on its way while the admission's is: see read.go.
	var read *cache.PricesRead
	if perr == nil {
		read = s.reader.BeginPrices(ctx, ids, seenPosition(c.Get(fiber.HeaderIfNoneMatch)))
	}
	if err := s.admitBegun(c, read, perr); err != nil {
		return err
	}
	items, err := read.Finish(ctx)
	if err != nil {
		return readFailed(err)
	}
	writeSnapshot(c, ids, items)
	return sendWrittenAt(c, snapshotPosition(items))
}

// snapshotPosition is the position a snapshot shows: the highest change
// number among its items (shown or not), which every node holds alike for
// the same items. A client that sends it back (in the ETag) is never shown
// an older item by any node (cache.Reader.BeginPrices).
func snapshotPosition(items []cache.PriceItem) int64 {
	var pos int64
	for _, it := range items {
		pos = max(pos, it.Seq)
	}
	return pos
}

// writeSnapshot writes {"data":[items shown...],"missing":[other ids...]}
// straight into the response's pooled buffer: a poll of 50 items is some
// 20 KB, not worth a fresh copy each time.
func writeSnapshot(c *fiber.Ctx, ids []string, items []cache.PriceItem) {
	r := c.Response()
	r.ResetBody()
	r.AppendBodyString(`{"data":[`)
	n := 0
	for _, it := range items {
		if it.Shown() {
			if n > 0 {
				r.AppendBodyString(",")
			}
			r.AppendBody(it.Body)
			n++
		}
	}
	r.AppendBodyString(`],"missing":[`)
	m := 0
	for i, it := range items {
		if !it.Shown() {
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
}
