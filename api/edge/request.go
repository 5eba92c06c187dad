package edge

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
)

// Limits of what the node reads of a request (contract, HTTP edge).
const (
	// MaxHeaderBytes bounds the request line and headers together; more
	// answers 431. It is fasthttp's read buffer: a header must fit in it.
	MaxHeaderBytes = 16 << 10
	// MaxBodyBytes bounds a request body. Every route is a GET and reads
	// none; the bound only keeps a hostile body small.
	MaxBodyBytes = 16 << 10
)

// The edge's answers carry fixed messages: the parser's own error text
// quotes the request (its Authorization header included), so none of it may
// reach a client or the log.
const (
	msgUnreadable      = "the request is not valid HTTP/1.1 and could not be read"
	msgHeadersTooLarge = "the request line and headers exceed 16 KiB"
	msgBodyTooLarge    = "the request body is too large"
	msgRequestTimeout  = "the request was not received in full in time"
	msgVersion         = "the request's HTTP version is not supported: use HTTP/1.1"
)

// ReadError maps an error of fasthttp's request parser to the answer's
// status, its fixed message and a short reason for the log.
func ReadError(err error) (status int, msg, reason string) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		return http.StatusRequestHeaderFieldsTooLarge, msgHeadersTooLarge, "headers_too_large"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge, msgBodyTooLarge, "body_too_large"
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout, msgRequestTimeout, "timeout"
	default:
		return http.StatusBadRequest, msgUnreadable, "malformed"
	}
}

// Refuse says whether a request fasthttp did read must be refused all the
// same, and with what status and fixed message (ok: it passes):
//
//   - an HTTP version other than 1.0 and 1.1 (fasthttp takes any
//     "HTTP/d.d" for 1.0): 505;
//   - control bytes (NUL, CR, LF, the other C0 bytes but tab, DEL) in its
//     method, target or header values, or a header name that is not a
//     token (a space inside a name, say): 400. fasthttp reads them; HTTP
//     forbids them (RFC 9110 5.5, 5.1) and nothing behind the edge expects
//     them.
func Refuse(req *fasthttp.Request) (status int, msg string, ok bool) {
	if p := req.Header.Protocol(); !bytes.Equal(p, []byte("HTTP/1.1")) && !bytes.Equal(p, []byte("HTTP/1.0")) {
		return http.StatusHTTPVersionNotSupported, msgVersion, false
	}
	bad := hasControlByte(req.Header.RequestURI()) || hasControlByte(req.Header.Method())
	if !bad {
		req.Header.VisitAll(func(k, v []byte) {
			bad = bad || !isToken(k) || hasControlByte(v)
		})
	}
	if bad {
		return http.StatusBadRequest, msgUnreadable, false
	}
	return 0, "", true
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
