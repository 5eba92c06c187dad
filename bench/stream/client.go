package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/bench/world"
)

// streamPath is the stream route of contract §3.
const streamPath = "/public/v1/stream"

// checkEvery: one price message in checkEvery is decoded in full and
// compared with its scan (and the first of each connection).
const checkEvery = 4096

// streamLoad is what every connection of the load shares: the schedule that
// says when each version was published, the notice clock, the current phase
// and the running totals the benchmark waits on.
type streamLoad struct {
	sched *world.UpdateSchedule
	clock *noticeClock
	// index maps a market id to its index in the schedule.
	index map[string]int32
	phase atomic.Pointer[streamPhase]

	// acks, snapshots and live count subscribe acknowledgements, snapshot
	// prices (the first price of a market after its acknowledgement) and
	// live prices over all connections.
	acks, snapshots, live atomic.Int64
	sampled               atomic.Int64
	// refused counts subscribes the node answered with an "unavailable"
	// error (it could not read the prices in time: subscribe again);
	// retry takes the connections to send theirs again.
	refused atomic.Int64
	retry   chan *streamClient
	// ended counts connections that ended before the benchmark closed
	// them; endedWhy is the first one's reason.
	ended    atomic.Int64
	endedMu  sync.Mutex
	endedWhy string
}

func (l *streamLoad) noteEnded(why string) {
	l.ended.Add(1)
	l.endedMu.Lock()
	defer l.endedMu.Unlock()
	if l.endedWhy == "" {
		l.endedWhy = why
	}
}

func (l *streamLoad) whyEnded() string {
	l.endedMu.Lock()
	defer l.endedMu.Unlock()
	return l.endedWhy
}

// clientFaults are the broken promises one connection saw.
type clientFaults struct {
	// SeqGaps counts messages whose seq was not the previous one's + 1.
	SeqGaps int64 `json:"seq_gaps"`
	// Backwards counts prices older than one the client already had.
	Backwards int64 `json:"versions_backwards"`
	// Unsubscribed counts prices of markets the client had no
	// acknowledgement for; Missing, ids an acknowledgement listed as
	// missing (every market of the world is served).
	Unsubscribed int64 `json:"prices_not_subscribed"`
	Missing      int64 `json:"ids_missing_in_ack"`
	// Unknown counts live versions the publisher never published.
	Unknown int64 `json:"versions_never_published"`
	// Errors counts error messages; Unreadable, messages the scan could not
	// read or misread (against a full decode).
	Errors     int64 `json:"error_messages"`
	Unreadable int64 `json:"unreadable_messages"`
	// Disconnected counts connections the server ended (or that failed)
	// before the benchmark closed them.
	Disconnected int64 `json:"disconnected"`
}

func (f *clientFaults) Add(o clientFaults) {
	f.SeqGaps += o.SeqGaps
	f.Backwards += o.Backwards
	f.Unsubscribed += o.Unsubscribed
	f.Missing += o.Missing
	f.Unknown += o.Unknown
	f.Errors += o.Errors
	f.Unreadable += o.Unreadable
	f.Disconnected += o.Disconnected
}

// streamClient is one WebSocket connection of the load. Its reader
// goroutine owns everything below ws until done is closed; the benchmark
// reads it only after.
type streamClient struct {
	n  int
	ws *websocket.Conn
	// subs are the markets asked for so far and last the last subscribe's
	// (the benchmark's side).
	subs, last []int32

	closing atomic.Bool
	done    chan struct{}
	// err is why the reader stopped.
	err error

	nextSeq int64
	// held is, per acknowledged market, the newest version received (0:
	// acknowledged, snapshot not yet received).
	held    map[int32]int64
	repeats int64
	faults  clientFaults
	// first describes the first fault.
	first string
	buf   []byte
	// checked says the first price was compared with a full decode.
	checked bool
}

// streamDialer opens the load's connections: write buffers are pooled
// (clients write a command now and then), reads use the default 4 KiB.
var streamDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, WriteBufferPool: &sync.Pool{}}

// dialStream opens connection n to addr with secret and starts its reader.
// A refused upgrade is an error naming the status and the answer's body.
func dialStream(ctx context.Context, l *streamLoad, addr, secret string, n int) (*streamClient, error) {
	hdr := http.Header{"Authorization": {"Bearer " + secret}}
	ws, resp, err := streamDialer.DialContext(ctx, "ws://"+addr+streamPath, hdr)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			return nil, fmt.Errorf("stream %d: upgrade refused: status %d: %s", n, resp.StatusCode, body)
		}
		return nil, fmt.Errorf("stream %d: %w", n, err)
	}
	c := &streamClient{n: n, ws: ws, done: make(chan struct{}), nextSeq: 1, held: map[int32]int64{}, buf: make([]byte, 0, 1024)}
	go c.read(l)
	return c, nil
}

// subscribeCmd is the subscribe command of ids.
func subscribeCmd(ids []string) []byte {
	b, err := json.Marshal(struct {
		Op  string   `json:"op"`
		IDs []string `json:"market_ids"`
	}{"subscribe", ids})
	if err != nil {
		panic(fmt.Sprintf("mdbench: encode subscribe: %v", err)) // strings only
	}
	return b
}

// subscribe asks for markets (the reader records the acknowledgement). Only
// the benchmark's goroutine writes; the reader's pongs are control frames,
// which may go concurrently.
func (c *streamClient) subscribe(markets []int32, ids []string) error {
	names := make([]string, len(markets))
	for i, m := range markets {
		names[i] = ids[m]
	}
	c.subs, c.last = append(c.subs, markets...), markets
	return c.send(names)
}

// resubscribe sends the last subscribe again.
func (c *streamClient) resubscribe(ids []string) error {
	names := make([]string, len(c.last))
	for i, m := range c.last {
		names[i] = ids[m]
	}
	return c.send(names)
}

func (c *streamClient) send(names []string) error {
	if err := c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, subscribeCmd(names)); err != nil {
		return fmt.Errorf("stream %d: subscribe: %w", c.n, err)
	}
	return nil
}

// close ends the connection from our side and waits for its reader.
func (c *streamClient) close() {
	c.closing.Store(true)
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second)) // the connection is going either way
	c.ws.Close() //nolint:errcheck // closing our side: the reader's end is what we wait for
	<-c.done
}

// read handles every message until the connection ends.
func (c *streamClient) read(l *streamLoad) {
	defer close(c.done)
	for {
		_, r, err := c.ws.NextReader()
		if err == nil {
			c.buf, err = readInto(r, c.buf[:0])
		}
		if err != nil {
			c.err = err
			if !c.closing.Load() {
				why := fmt.Sprintf("stream %d: ended by the server or the network: %v", c.n, err)
				c.faults.Disconnected++
				c.fault(why)
				l.noteEnded(why)
			}
			return
		}
		c.handle(l, c.buf, l.sched.Since(time.Now()))
	}
}

// readInto appends r's content to buf, growing it as needed.
func readInto(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (c *streamClient) fault(msg string) {
	if c.first == "" {
		c.first = msg
	}
}

// handle accounts one message received at (ns since the schedule's start).
func (c *streamClient) handle(l *streamLoad, b []byte, at int64) {
	m, err := scanStream(b)
	if err == nil && m.Kind == kindPrice && (!c.checked || l.sampled.Add(1)%checkEvery == 0) {
		c.checked = true
		err = checkStream(b, m)
	}
	if err != nil {
		c.faults.Unreadable++
		c.fault(fmt.Sprintf("stream %d: %v", c.n, err))
		return
	}
	if m.Seq != c.nextSeq {
		c.faults.SeqGaps++
		c.fault(fmt.Sprintf("stream %d: seq %d after %d", c.n, m.Seq, c.nextSeq-1))
	}
	c.nextSeq = m.Seq + 1
	switch m.Kind {
	case kindPrice:
		c.price(l, m, at)
	case kindSubscribed:
		w, err := decodeStream(b)
		if err != nil {
			c.faults.Unreadable++
			c.fault(fmt.Sprintf("stream %d: %v", c.n, err))
			return
		}
		for _, id := range w.MarketIDs {
			if mi, ok := l.index[id]; ok {
				if _, had := c.held[mi]; !had {
					c.held[mi] = 0
				}
			}
		}
		if len(w.Missing) > 0 {
			c.faults.Missing += int64(len(w.Missing))
			c.fault(fmt.Sprintf("stream %d: subscribe acknowledged %s as missing", c.n, w.Missing))
		}
		l.acks.Add(1)
	case kindError:
		if w, err := decodeStream(b); err == nil && w.Code == "unavailable" && l.retry != nil {
			l.refused.Add(1)
			l.retry <- c
			return
		}
		c.faults.Errors++
		c.fault(fmt.Sprintf("stream %d: error message: %.200s", c.n, b))
	}
}

// price accounts a price message: the first of a market after its
// acknowledgement is its snapshot; later ones are live deliveries, which
// must only move forward and are measured when a phase is current.
func (c *streamClient) price(l *streamLoad, m streamMsg, at int64) {
	mi, known := l.index[string(m.Market)]
	last, subscribed := c.held[mi]
	switch {
	case !known || !subscribed:
		c.faults.Unsubscribed++
		c.fault(fmt.Sprintf("stream %d: price of %s, not acknowledged", c.n, m.Market))
		return
	case last == 0:
		c.held[mi] = m.Version
		l.snapshots.Add(1)
		return
	case m.Version < last:
		c.faults.Backwards++
		c.fault(fmt.Sprintf("stream %d: %s version %d after %d", c.n, m.Market, m.Version, last))
		return
	case m.Version == last:
		c.repeats++
		return
	}
	c.held[mi] = m.Version
	l.live.Add(1)
	n, planned := l.sched.Update(mi, m.Version)
	pub, published := l.sched.PubTime(mi, m.Version)
	if !planned || !published {
		c.faults.Unknown++
		c.fault(fmt.Sprintf("stream %d: %s version %d was never published", c.n, m.Market, m.Version))
		return
	}
	if p := l.phase.Load(); p != nil {
		p.conflated.Add(m.Version - last - 1)
		p.deliver(l.clock, n, pub, at)
	}
}

// behind counts the markets the client asked for that it does not hold at
// their newest published version (never acknowledged or snapshotted
// included): updates lost, once publishing has stopped and the node had
// time. Call it after the reader has stopped.
func (c *streamClient) behind(s *world.UpdateSchedule, ids []string) (n int64, first string) {
	for _, m := range c.subs {
		if v, want := c.held[m], s.Latest(m); v < want {
			if n == 0 {
				first = fmt.Sprintf("stream %d: %s held at version %d, the newest published is %d", c.n, ids[m], v, want)
			}
			n++
		}
	}
	return n, first
}
