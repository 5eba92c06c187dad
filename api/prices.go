package api

import (
	"encoding/binary"
	"strconv"

	"github.com/cespare/xxhash/v2"
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
	var tag [40]byte
	if notModifiedTag(c, appendSnapshotTag(tag[:0], ids, items)) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	writeSnapshot(c, ids, items)
	c.Status(fiber.StatusOK)
	return nil
}

// appendSnapshotTag appends the ETag of the snapshot of ids whose items
// are items, quotes included: "<hash>-<pos>", a hash of what makes the
// answer's bytes (each shown item's body, by the hash the replica keeps
// with it, and each missing id, in order), then the position the answer
// shows (snapshotPosition), so that the client's next If-None-Match tells
// any node what it has seen (seenPosition). Every node gives the same
// answer the same tag, and a 304 is decided before the answer (some 20 KB
// for 50 ids) is written or hashed.
func appendSnapshotTag(dst []byte, ids []string, items []cache.PriceItem) []byte {
	var d xxhash.Digest
	d.Reset()
	// Ids match [A-Za-z0-9_-], so a byte 1 (a shown item's 8-byte sum
	// follows) or 2 (a missing id follows) ends the id before it.
	var b [9]byte
	for i, it := range items {
		if it.Shown() {
			b[0] = 1
			binary.LittleEndian.PutUint64(b[1:], it.BodySum())
			d.Write(b[:]) //nolint:errcheck // a hash's Write never fails
			continue
		}
		b[0] = 2
		d.Write(b[:1])        //nolint:errcheck // as above
		d.WriteString(ids[i]) //nolint:errcheck // as above
	}
	dst = strconv.AppendUint(append(dst, '"'), d.Sum64(), 36)
	if pos := snapshotPosition(items); pos > 0 {
		dst = strconv.AppendInt(append(dst, '-'), pos, 10)
	}
	return append(dst, '"')
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
