package api

// A stream's connection as the upgrader and the WebSocket library hold it,
// once fasthttp has let go of it.

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// streamReadBuffer is a stream's read buffer: commands are rare and short,
// and a longer message is read through it in pieces. The upgrader uses a
// hijacked reader as it is only when it is bigger than 256 bytes.
const streamReadBuffer = 257

// hijacked is a stream's connection as the net/http upgrader wants it:
// the upgrader writes the 101 answer on it itself, and reads the
// connection through br.
type hijacked struct {
	c  net.Conn
	h  http.Header
	br *bufio.Reader
	sc *streamConn
}

func (w *hijacked) Header() http.Header         { return w.h }
func (w *hijacked) Write(b []byte) (int, error) { return w.c.Write(b) }
func (w *hijacked) WriteHeader(int)             {}
func (w *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.br = bufio.NewReaderSize(w.c, streamReadBuffer)
	w.sc = &streamConn{Conn: w.c}
	return w.sc, bufio.NewReadWriter(w.br, bufio.NewWriterSize(w.c, 16)), nil
}

// streamConn is a stream's connection as the WebSocket library holds it.
// Once the upgrade is answered, the library writes to it only on its own,
// to close a stream whose client broke the protocol (1002) or sent a
// message over the read limit (1009): those writes never wait for room on
// the socket (what it does not take is dropped: the stream ends anyway).
// So the socket's write lock they take never holds up a fan-out worker's
// write (stream.Output) behind a client that reads nothing. The stream's
// writer writes to the connection under it (Underlying): pongs, closes
// and the answer to a client's close are its frames.
type streamConn struct {
	net.Conn
	upgraded atomic.Bool
}

// errStreamSocketFull: a library write the socket had no room for.
var errStreamSocketFull = errors.New("the stream's socket is full: the close frame is dropped")

func (c *streamConn) Write(b []byte) (int, error) {
	if !c.upgraded.Load() {
		return c.Conn.Write(b) // the 101 answer
	}
	out := newStreamOutput(c.Conn)
	if out == nil {
		return c.Conn.Write(b)
	}
	n, err := out.TryWrite(b)
	if err == nil && n < len(b) {
		err = errStreamSocketFull
	}
	return n, err
}

// Underlying is the connection the stream writes to itself.
func (c *streamConn) Underlying() net.Conn { return c.Conn }

// handshake is what the upgrade needs of the request and of the front
// door's answer (request id, RateLimit headers), copied: fasthttp reuses
// both once the handler returns.
func handshake(fctx *fasthttp.RequestCtx) (*http.Request, http.Header) {
	req := &http.Request{Method: http.MethodGet, Header: http.Header{}}
	fctx.Request.Header.VisitAll(func(k, v []byte) {
		req.Header.Add(string(k), string(v))
	})
	answer := http.Header{}
	fctx.Response.Header.VisitAll(func(k, v []byte) {
		switch http.CanonicalHeaderKey(string(k)) {
		case "Content-Type", "Content-Length", "Connection", "Upgrade", "Server", "Date",
			"Sec-Websocket-Accept", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol":
		default:
			answer.Add(string(k), string(v))
		}
	})
	return req, answer
}
