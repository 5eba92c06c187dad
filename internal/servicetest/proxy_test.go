package servicetest

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// backend is a loopback TCP server that answers each connection with
// serve; it is closed when the test ends.
func backend(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialProxy connects to p with a generous deadline on every read and write.
func dialProxy(t *testing.T, p *frontProxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatalf("dial the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a fresh connection
	return c.(*net.TCPConn)
}

// expectReset connects to p and expects the connection reset: the proxy
// resets what it cannot pass on, and the reset may reach the client before
// its connect returns (seen in CI on a busy machine) or on its first read.
func expectReset(t *testing.T, p *frontProxy, when string) {
	t.Helper()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial %s: %v, want success or the connection reset", when, err)
		}
		return
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a fresh connection
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %s: %v, want the connection reset", when, err)
	}
}

// TestFrontProxy: bytes pass both ways with half-closes kept, a node's
// close reaches the client, new connections go to the current target, are
// reset while there is none, and close cuts what is open.
func TestFrontProxy(t *testing.T) {
	echo := backend(t, func(c net.Conn) { io.Copy(c, c) })             //nolint:errcheck // the test reads what came back
	greet := backend(t, func(c net.Conn) { io.WriteString(c, "bye") }) //nolint:errcheck // as above
	p := newFrontProxy(t)

	t.Run("echo with a half-close", func(t *testing.T) {
		p.setTarget(echo)
		c := dialProxy(t, p)
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		// The node sees the client's EOF, still answers, then closes.
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "ping" {
			t.Fatalf("got %q, %v; want ping then EOF", got, err)
		}
	})

	t.Run("the node closes", func(t *testing.T) {
		p.setTarget(greet)
		c := dialProxy(t, p)
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "bye" {
			t.Fatalf("got %q, %v; want bye then EOF", got, err)
		}
	})

	t.Run("down", func(t *testing.T) {
		p.setTarget("")
		expectReset(t, p, "while the node is down")
	})

	t.Run("the node's port closed", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := ln.Addr().String()
		ln.Close()
		p.setTarget(gone)
		expectReset(t, p, "with the node's port closed")
	})

	t.Run("close cuts open connections", func(t *testing.T) {
		q := newFrontProxy(t)
		q.setTarget(echo)
		c := dialProxy(t, q)
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		if b := make([]byte, 1); !func() bool { _, err := io.ReadFull(c, b); return err == nil && b[0] == 'x' }() {
			t.Fatal("no echo through the second proxy")
		}
		q.close()
		if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the connection outlived the proxy: %v", err)
		}
		if _, err := net.DialTimeout("tcp", q.addr(), 5*time.Second); err == nil {
			t.Fatal("the closed proxy still accepts")
		}
	})
}

// TestListenWatch: the addresses come from the node's JSON log however its
// writes split the lines; an API node needs both, ingest the admin one.
func TestListenWatch(t *testing.T) {
	log := `{"time":"t","level":"INFO","msg":"migrations","addr":"not this"}` + "\n" +
		"not JSON at all\n" +
		`{"time":"t","level":"INFO","msg":"admin listening","addr":"127.0.0.1:4001"}` + "\n" +
		`{"time":"t","level":"INFO","msg":"api listening","addr":"127.0.0.1:4002"}` + "\n"
	for _, chunk := range []int{1, 7, 64, len(log)} {
		for _, api := range []bool{true, false} {
			w := newListenWatch(api)
			cut := strings.Index(log, `{"time":"t","level":"INFO","msg":"api`)
			for i := 0; i < len(log); i += chunk {
				if !api && i >= cut {
					break
				}
				end := min(i+chunk, len(log))
				if n, err := w.Write([]byte(log[i:end])); n != end-i || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			select {
			case <-w.found:
			default:
				t.Fatalf("chunks of %d, api %v: not found", chunk, api)
			}
			if w.admin != "127.0.0.1:4001" || (api && w.http != "127.0.0.1:4002") || (!api && w.http != "") {
				t.Fatalf("chunks of %d, api %v: admin %q, http %q", chunk, api, w.admin, w.http)
			}
		}
	}
	w := newListenWatch(true)
	w.Write([]byte(log[:strings.Index(log, `{"time":"t","level":"INFO","msg":"api`)])) //nolint:errcheck // never fails
	select {
	case <-w.found:
		t.Fatal("an API node found without its api address")
	default:
	}
}
