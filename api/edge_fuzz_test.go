package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// fuzzSecret is the key secret the seed corpus carries.
const fuzzSecret = "mdk_live_FuzzSeedSecretFuzzSeedSecretFuzzSe1234"

// fuzzNode serves a real api.Server (real store, limiter and logs) on a
// loopback listener for the whole fuzz run; the log goes to logs.
func fuzzNode(f *testing.F) (addr string, logs *testenv.LogBuffer) {
	f.Helper()
	n := newWorld(f).node(f, withLimit(1<<30), withAuthFailLimit(1<<30), withTimeouts(2*time.Second, 2*time.Second))
	return strings.TrimPrefix(n.base, "http://"), n.logs
}

var authLine = regexp.MustCompile(`(?im)^authorization:[ \t]*bearer[ \t]+([A-Za-z0-9_-]{12,})`)

// FuzzRawRequest sends raw bytes to a real node, then half-closes: whatever
// the bytes, the node answers with well-formed HTTP (or nothing), never a
// 5xx other than 503, and never echoes a key secret it was sent.
func FuzzRawRequest(f *testing.F) {
	auth := "Authorization: Bearer " + fuzzSecret + "\r\n"
	for _, seed := range []string{
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: -1\r\n\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\nBroken\r\n" + auth + "\r\n",
		"GET\r\n" + auth + "\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth + "X-Nul: \x00\r\n\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth + "\r\nGET /public/v1/events HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"OPTIONS /public/v1/key HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\nAccess-Control-Request-Method: GET\r\n" + auth + "\r\n",
		"GET /public/v1/key HTTP/1.1\r\nHost: x\r\n" + auth,
		"",
	} {
		f.Add([]byte(seed))
	}
	addr, logs := fuzzNode(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // the I/O reports it
		go func() {
			c.Write(raw)                  //nolint:errcheck // the node may close first
			c.(*net.TCPConn).CloseWrite() //nolint:errcheck // as above
		}()
		out, err := io.ReadAll(c)
		if err != nil && !isReset(err) {
			t.Fatalf("reading the answer: %v (got %q)", err, out)
		}
		br := bufio.NewReader(bytes.NewReader(out))
		for n := 0; ; n++ {
			if _, err := br.Peek(1); err == io.EOF {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("answer %d is not HTTP: %v\n%q", n, err, out)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("answer %d body: %v\n%q", n, err, out)
			}
			if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("answer %d: status %d\n%s", n, resp.StatusCode, body)
			}
		}
		// Inputs run one at a time: what the log holds now is this input's.
		logged := logs.Take()
		for _, m := range authLine.FindAllSubmatch(raw, -1) {
			secret := m[1]
			if bytes.Count(raw, secret) != 1 {
				continue // also elsewhere in the request, where echoing it may be fine
			}
			if bytes.Contains(out, secret) {
				t.Fatalf("the answer echoes the Authorization secret %q:\n%q", secret, out)
			}
			if bytes.Contains(logged, secret) {
				t.Fatalf("the node logged the Authorization secret %q", secret)
			}
		}
	})
}

// isReset: the node may reset a connection it closed with input unread.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
