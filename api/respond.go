package api

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

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

func etagMatches(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == etag || t == "W/"+etag {
			return true
		}
	}
	return false
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
