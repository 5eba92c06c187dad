package api

import (
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Limits of what the node reads of a request (contract, HTTP edge).
const (
	// MaxHeaderBytes bounds the request line and headers together; more
	// answers 431. It is fasthttp's read buffer: a header must fit in it.
	MaxHeaderBytes = 16 << 10
	// maxBodyBytes bounds a request body. Every route is a GET and reads
	// none; the bound only keeps a hostile body small.
	maxBodyBytes = 16 << 10
)

// The edge's answers carry fixed messages: the parser's own error text
// quotes the request (its Authorization header included), so none of it may
// reach a client or the log.
const (
	msgUnreadable      = "the request is not valid HTTP/1.1 and could not be read"
	msgHeadersTooLarge = "the request line and headers exceed 16 KiB"
	msgBodyTooLarge    = "the request body is too large"
	msgRequestTimeout  = "the request was not received in full in time"
)

// readError answers a request fasthttp could not read (fasthttp's
// Server.ErrorHandler, in place of Fiber's, which passes the parser's text
// on). The answer is the contract's error body with a fixed message and a
// fresh X-Request-Id; fasthttp closes the connection after it. It is counted
// under the route "unparsed" and logged at debug level without any of the
// request.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	status, msg, reason := classifyReadError(err)
	id := newRequestID()
	ctx.Response.Reset()
	writeEdgeError(&ctx.Response, status, msg, id)
	s.requests.WithLabelValues("unparsed", strconv.Itoa(status)).Inc()
	s.log.Debug("request not read", "request_id", id, "status", status, "reason", reason,
		"remote_addr", ctx.RemoteAddr().String())
}

// classifyReadError maps a read error to its status, fixed message and a
// short reason for the log.
func classifyReadError(err error) (status int, msg, reason string) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		return fiber.StatusRequestHeaderFieldsTooLarge, msgHeadersTooLarge, "headers_too_large"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fiber.StatusRequestEntityTooLarge, msgBodyTooLarge, "body_too_large"
	case errors.As(err, &ne) && ne.Timeout():
		return fiber.StatusRequestTimeout, msgRequestTimeout, "timeout"
	default:
		return fiber.StatusBadRequest, msgUnreadable, "malformed"
	}
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

// refuseControlBytes answers 400 (fixed message, connection closed) to a
// request whose target or headers hold control bytes (NUL, CR, LF, the
// other C0 bytes but tab, DEL), or whose header names are not tokens (a
// space inside a name, say). fasthttp reads them; HTTP forbids them
// (RFC 9110 5.5, 5.1) and nothing behind the edge expects them. The answer gets
// a fresh X-Request-Id, as readError's: the caller's would echo bytes of a
// request refused as unreadable.
func (s *Server) refuseControlBytes(c *fiber.Ctx) error {
	req := c.Request()
	bad := hasControlByte(req.Header.RequestURI()) || hasControlByte(req.Header.Method())
	if !bad {
		req.Header.VisitAll(func(k, v []byte) {
			bad = bad || !isToken(k) || hasControlByte(v)
		})
	}
	if !bad {
		return c.Next()
	}
	id := newRequestID()
	c.Locals(localRequestID, id)
	c.Response().SetConnectionClose()
	writeEdgeError(c.Response(), fiber.StatusBadRequest, msgUnreadable, id)
	return nil
}

// isToken reports whether b is an RFC 9110 token (a header name).
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, x := range b {
		switch {
		case 'a' <= x && x <= 'z', 'A' <= x && x <= 'Z', '0' <= x && x <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", x) >= 0:
		default:
			return false
		}
	}
	return true
}

func hasControlByte(b []byte) bool {
	for _, x := range b {
		if (x < 0x20 && x != '\t') || x == 0x7f {
			return true
		}
	}
	return false
}

// responseWriteBuffer is the buffer an answer is written through: one
// write(2) for an answer up to its size (api/server.go).
const responseWriteBuffer = 64 << 10
