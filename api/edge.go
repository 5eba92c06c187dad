package api

import (
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/api/edge"
)

// responseWriteBuffer is the buffer an answer is written through: one
// write(2) for an answer up to its size (api/server.go).
const responseWriteBuffer = 64 << 10

// readError answers a request fasthttp could not read (fasthttp's
// Server.ErrorHandler, in place of Fiber's, which passes the parser's text
// on). The answer is the contract's error body with a fixed message and a
// fresh X-Request-Id; fasthttp closes the connection after it. It is counted
// under the route "unparsed" and logged at debug level without any of the
// request.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	status, msg, reason := edge.ReadError(err)
	id := newRequestID()
	ctx.Response.Reset()
	writeEdgeError(&ctx.Response, status, msg, id)
	s.requests.WithLabelValues("unparsed", strconv.Itoa(status)).Inc()
	s.log.Debug("request not read", "request_id", id, "status", status, "reason", reason,
		"remote_addr", ctx.RemoteAddr().String())
}

// refuseMalformed answers a request the parser read but HTTP forbids
// (edge.Refuse: an unsupported version, control bytes, a header name that
// is not a token) with the edge's fixed error and closes the connection.
// The answer gets a fresh X-Request-Id, as readError's: the caller's would
// echo bytes of a request refused as unreadable.
func (s *Server) refuseMalformed(c *fiber.Ctx) error {
	status, msg, ok := edge.Refuse(c.Request())
	if ok {
		return c.Next()
	}
	id := newRequestID()
	c.Locals(localRequestID, id)
	c.Response().SetConnectionClose()
	writeEdgeError(c.Response(), status, msg, id)
	return nil
}

// writeEdgeError writes the contract's error body with a fixed message.
func writeEdgeError(r *fasthttp.Response, status int, msg, id string) {
	var body errorBody
	body.Error.Code, body.Error.Message = kinds[KindInvalidRequest].code, msg
	b, _ := marshalJSON(body) // a struct of strings always encodes
	r.SetStatusCode(status)
	r.Header.Set(fiber.HeaderXRequestID, id)
	r.Header.Set(fiber.HeaderCacheControl, "no-store")
	r.Header.SetContentType(fiber.MIMEApplicationJSONCharsetUTF8)
	r.SetBodyRaw(b)
}
