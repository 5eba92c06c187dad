package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/api/stream"
)

// What a node does with a client message that is no command, on a real
// node's socket (the wait in the poller, the library's writes that never
// wait): a binary message closes with 1003, a text message that is not
// UTF-8 with 1007, a message over stream.MaxCommandBytes with 1009; each
// with no message before the close.
func TestStreamFramesThatAreNoCommand(t *testing.T) {
	_, nodes, secret, _ := streamWorld(t, 1, 1)
	over := []byte(`{"op":"subscribe","market_ids":["s000"],"pad":"` + strings.Repeat("x", stream.MaxCommandBytes) + `"}`)
	for _, c := range []struct {
		name string
		typ  int
		data []byte
		code int
	}{
		{"binary", websocket.BinaryMessage, []byte(`{"op":"subscribe","market_ids":["s000"]}`), stream.CloseUnsupportedData},
		{"not UTF-8", websocket.TextMessage, []byte("{\"op\":\"subscribe\",\"market_ids\":[\"s000\"],\"note\":\"\xc3\x28\"}"), stream.CloseInvalidPayload},
		{"over the read limit", websocket.TextMessage, over, websocket.CloseMessageTooBig},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := nodes[0].mustDial(t, secret)
			if err := ws.c.WriteMessage(c.typ, c.data); err != nil {
				t.Fatal(err)
			}
			code, took := ws.closed(5*time.Second, func(m streamMsg) {
				t.Errorf("message %s before the close", m.raw)
			})
			if code != c.code || took > time.Second {
				t.Errorf("closed with %d after %s; want %d within 1s", code, took, c.code)
			}
		})
	}
}
