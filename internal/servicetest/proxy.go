package servicetest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// frontProxy is a TCP proxy at a fixed address in front of an API node.
// The node listens on a new port at every start; the proxy's listener is
// held by the test process until the test ends, so the node's URL stays the
// same across restarts and no other process (another package's test, an
// outgoing connection given that ephemeral port) can take it while the node
// is down. Bytes pass through unchanged (the Host header, WebSocket
// upgrades, close frames); a connection ends when either side closes.
// While the node is down, a new connection is reset at once, as a client
// of a real deployment behind a load balancer would see it.
type frontProxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string // the node's own address; "" while it is down
	conns  map[net.Conn]struct{}
	closed bool
}

// dialTimeout bounds the proxy's connection to the node: on the loopback
// it succeeds or is refused at once, unless the machine is stalled.
const dialTimeout = 10 * time.Second

func newFrontProxy(t testing.TB) *frontProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("servicetest: proxy listen: %v", err)
	}
	p := &frontProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// addr is the proxy's host:port, fixed for its life.
func (p *frontProxy) addr() string { return p.ln.Addr().String() }

// setTarget points new connections at the node's address ("" while it is
// down). Connections already open keep their node.
func (p *frontProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *frontProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of file descriptors, a connection
			// aborted before it was accepted): accept again shortly.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *frontProxy) handle(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	if target == "" {
		reset(c)
		return
	}
	b, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil { // the node went down in between: as if it were down
		reset(c)
		return
	}
	if !p.track(c, b) {
		c.Close()
		b.Close()
		return
	}
	defer p.untrack(c, b)
	up := make(chan struct{})
	go func() {
		defer close(up)
		io.Copy(b, c) //nolint:errcheck // either side's close ends the copy; that is the point
		// The client is done sending: tell the node, which may still answer.
		if tc, ok := b.(*net.TCPConn); ok {
			tc.CloseWrite() //nolint:errcheck // the node may be gone already
		}
	}()
	io.Copy(c, b) //nolint:errcheck // as above
	// The node closed (or died): so does the client's connection.
	c.Close()
	b.Close()
	<-up
}

// reset closes c with a TCP reset: the client fails at once, as if refused.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) //nolint:errcheck // a plain close is the fallback
	}
	c.Close()
}

func (p *frontProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *frontProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// close stops accepting, cuts every open connection and waits for the
// proxy's goroutines.
func (p *frontProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
