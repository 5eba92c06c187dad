package api

import (
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// Once a stream runs, the WebSocket library's own writes (its close frame
// on a client's protocol error) never wait for room: on a socket full of
// frames for a client that reads nothing, such a write would hold the
// socket's write lock for its 1 s deadline, and a fan-out worker's write
// to that socket (stream.Output) with it, which holds every stream of the
// worker's markets.
func TestStreamLibraryWritesNeverWait(t *testing.T) {
	_, server := testenv.LoopbackPair(t) // the client reads nothing, on purpose
	out := newStreamOutput(server)
	chunk := make([]byte, 64<<10)
	filled := 0
	for {
		n, err := out.TryWrite(chunk)
		if err != nil {
			t.Fatal(err)
		}
		filled += n
		if n < len(chunk) {
			break
		}
		if filled > 256<<20 {
			t.Fatal("the socket took 256 MB without filling")
		}
	}
	sc := &streamConn{Conn: server}
	sc.upgraded.Store(true)
	sc.SetWriteDeadline(time.Now().Add(time.Second)) //nolint:errcheck // as the library sets it
	start := time.Now()
	n, err := sc.Write(make([]byte, 4<<10))
	took := time.Since(start)
	if err == nil || n == 4<<10 {
		t.Fatalf("a write to a full socket: %d bytes, err %v; want it refused", n, err)
	}
	if took > 100*time.Millisecond {
		t.Errorf("a library write to a full socket took %s; want no wait", took)
	}
	t.Logf("socket full after %d KB; the library's write returned in %s: %v", filled>>10, took, err)
}
