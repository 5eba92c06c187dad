package api

import (
	"bytes"
	"encoding/json"
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

// sendTagged is send for a body whose tag (bodyTag) the caller kept.
func sendTagged(c *fiber.Ctx, body []byte, tag string) error {
	h := &c.Response().Header
	h.Set(fiber.HeaderETag, tag)
	h.Set(fiber.HeaderCacheControl, "no-cache")
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" && etagMatches(inm, tag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	h.SetContentType(fiber.MIMEApplicationJSON)
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
func notModified(c *fiber.Ctx, body []byte) bool { return notModifiedAt(c, body, 0) }

// notModifiedAt is notModified for an answer that shows position pos (0:
// none is named).
func notModifiedAt(c *fiber.Ctx, body []byte, pos int64) bool {
	var tag [40]byte
	return notModifiedTag(c, appendTag(tag[:0], body, pos))
}

// notModifiedTag sets the caching headers of an answer whose ETag is etag
// and says whether the client's If-None-Match holds it (304).
func notModifiedTag(c *fiber.Ctx, etag []byte) bool {
	h := &c.Response().Header
	h.SetBytesV(fiber.HeaderETag, etag)
	h.Set(fiber.HeaderCacheControl, "no-cache")
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" && etagMatches(inm, string(etag)) {
		return true
	}
	h.SetContentType(fiber.MIMEApplicationJSON)
	return false
}

// appendTag appends the ETag of body at pos (0: none named), quotes included.
func appendTag(dst, body []byte, pos int64) []byte {
	dst = strconv.AppendUint(append(dst, '"'), xxhash.Sum64(body), 36)
	if pos > 0 {
		dst = strconv.AppendInt(append(dst, '-'), pos, 10)
	}
	return append(dst, '"')
}

// bodyTag is the ETag send gives body.
func bodyTag(body []byte) string {
	var tag [40]byte
	return string(appendTag(tag[:0], body, 0))
}

// seenPosition is the highest position named by the tags of an
// If-None-Match header ("<hash>-<pos>", as sendWrittenAt makes them, weak or
// not); 0 when none names one. Tags it cannot read name nothing: a client
// that sends garbage is answered as one that sends no tag.
func seenPosition(header string) int64 {
	var pos int64
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
			continue
		}
		t = t[1 : len(t)-1]
		i := strings.LastIndexByte(t, '-')
		if i < 0 {
			continue
		}
		if p, err := strconv.ParseInt(t[i+1:], 10, 64); err == nil && p > 0 {
			pos = max(pos, p)
		}
	}
	return pos
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
	writeList(bufferBody{&b}, items, nil, false)
	return b.Bytes()
}

// sendList answers {"data":[items...]} written straight into the response's
// pooled buffer.
func sendList(c *fiber.Ctx, items [][]byte, next []byte, paged bool) error {
	c.Response().ResetBody()
	writeList(responseBody{c.Response()}, items, next, paged)
	return sendWritten(c)
}

// bodyWriter is where an answer is assembled: a buffer of its own
// (bufferBody), or the response's (responseBody). Neither can fail.
type bodyWriter interface {
	add(p []byte)
	addString(s string)
}

// responseBody appends to a response's body.
type responseBody struct{ r *fasthttp.Response }

func (b responseBody) add(p []byte)       { b.r.AppendBody(p) }
func (b responseBody) addString(s string) { b.r.AppendBodyString(s) }

// bufferBody appends to a buffer of the answer's own.
type bufferBody struct{ b *bytes.Buffer }

func (b bufferBody) add(p []byte)       { b.b.Write(p) }
func (b bufferBody) addString(s string) { b.b.WriteString(s) }

// writeList writes {"data":[items...]}, nil items left out, with
// "next_cursor" (next, or null when next is nil) when paged.
func writeList(w bodyWriter, items [][]byte, next []byte, paged bool) {
	w.addString(`{"data":[`)
	n := 0
	for _, it := range items {
		if it == nil {
			continue
		}
		if n > 0 {
			w.addString(",")
		}
		w.add(it)
		n++
	}
	w.addString("]")
	if paged {
		w.addString(`,"next_cursor":`)
		if next == nil {
			next = []byte("null")
		}
		w.add(next)
	}
	w.addString("}")
}

// marshalJSON encodes without HTML escaping ("<key>" stays readable).
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
