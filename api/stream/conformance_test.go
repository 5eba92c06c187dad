package stream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// closedWith reads until the stream closes and checks its close code: no
// message may come first.
func (c *client) closedWith(code int) {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // the read reports it
	_, data, err := c.ws.ReadMessage()
	if err == nil {
		c.t.Fatalf("message %s, want the close %d", data, code)
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code {
		c.t.Fatalf("read: %v, want the close %d", err, code)
	}
}

// A binary message is no command: the connection closes with 1003
// (unsupported data), whatever the message holds.
func TestBinaryMessageCloses(t *testing.T) {
	src, _ := seeded(1)
	h := startHub(t, src, quietConfig())
	c := h.dial(t)
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"op":"subscribe","market_ids":["m000"]}`)); err != nil {
		t.Fatal(err)
	}
	c.closedWith(CloseUnsupportedData)
	if got := counterValue(t, h.m.closes.WithLabelValues("1003")); got != 1 {
		t.Errorf("closes counted with 1003: %v, want 1", got)
	}
}

// A text message that is not UTF-8 closes the connection with 1007, even
// when it would parse as a command.
func TestInvalidUTF8Closes(t *testing.T) {
	src, _ := seeded(1)
	h := startHub(t, src, quietConfig())
	c := h.dial(t)
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte("{\"op\":\"subscribe\",\"market_ids\":[\"m000\"],\"note\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	c.closedWith(CloseInvalidPayload)
}

// A command of MaxCommandBytes is read and answered;
// one byte more closes the connection with 1009.
func TestMessageOverReadLimitCloses(t *testing.T) {
	h := startHub(t, newFakePrices(), quietConfig())
	c := h.dial(t)
	msg := func(n int) []byte {
		head := `{"op":"subscribe","market_ids":["m000"],"pad":"`
		return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, msg(MaxCommandBytes)); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m.Type != "subscribed" {
		t.Fatalf("%+v, want a subscribe of %d bytes acknowledged", m, MaxCommandBytes)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, msg(MaxCommandBytes+1)); err != nil {
		t.Fatal(err)
	}
	c.closedWith(websocket.CloseMessageTooBig)
}
