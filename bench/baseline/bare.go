// Package baseline is the bare baseline a benchmark holds an API route
// against: a process of its own serving the route's bytes from a bare Fiber
// handler, and the comparison of the two under the same load, alternately.
package baseline

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/bench/world"
)

// bareConfig is the baseline's Fiber configuration: Fiber's defaults.
// MDBENCH_BARE_WRITE_BUFFER (bytes) sets its write buffer instead, to
// compare with a baseline that writes through a buffer as big as the
// node's (docs/benchmarks.md, "one write an answer").
func bareConfig() fiber.Config {
	cfg := fiber.Config{DisableStartupMessage: true}
	if n, err := strconv.Atoi(os.Getenv("MDBENCH_BARE_WRITE_BUFFER")); err == nil && n > 0 {
		cfg.WriteBufferSize = n
	}
	return cfg
}

// ServeBare is the baseline server: a bare Fiber handler returning body
// for every GET, run by `mdbench -serve-bare ADDR -bare-body FILE` as a
// process of its own, like the API node it is compared with.
func ServeBare(addr, bodyFile string) error {
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		return err
	}
	app := fiber.New(bareConfig())
	app.Get("/*", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(body)
	})
	return app.Listen(addr)
}

// ServeBareBodies is the baseline of many URLs: bodiesFile maps each query
// string to the body answered for it (404 for any other), one map lookup a
// request, as the poll benchmark's baseline. The bodies are the API's own
// 200 answers, so each watchlist gets a body of the same size.
func ServeBareBodies(addr, bodiesFile string) error {
	raw, err := os.ReadFile(bodiesFile)
	if err != nil {
		return err
	}
	var bodies map[string][]byte
	if err := json.Unmarshal(raw, &bodies); err != nil {
		return fmt.Errorf("bodies %s: %w", bodiesFile, err)
	}
	app := fiber.New(bareConfig())
	app.Get("/*", func(c *fiber.Ctx) error {
		body, ok := bodies[string(c.Request().URI().QueryString())]
		if !ok {
			return c.SendStatus(fiber.StatusNotFound)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(body)
	})
	return app.Listen(addr)
}

// Bare is the baseline server running as a child process.
type Bare struct {
	Addr string
	cmd  *exec.Cmd
	// bodyFile holds the body the baseline serves; Stop removes it.
	bodyFile string
}

// StartBare starts the baseline serving body and waits until it answers.
func StartBare(ctx context.Context, body []byte, dir string) (*Bare, error) {
	return startBare(ctx, "-bare-body", body, dir)
}

// StartBareBodies starts the baseline answering each query string of bodies
// with its body, and waits until it answers.
func StartBareBodies(ctx context.Context, bodies map[string][]byte, dir string) (*Bare, error) {
	data, err := json.Marshal(bodies)
	if err != nil {
		return nil, err
	}
	return startBare(ctx, "-bare-bodies", data, dir)
}

// startBare writes data to a file of dir and runs this binary with
// flag FILE and -serve-bare.
func startBare(ctx context.Context, flag string, data []byte, dir string) (*Bare, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := world.FreePort()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "bare-body-*.json")
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name()) //nolint:errcheck // best effort: the write error is the one to report
		return nil, err
	}
	cmd := exec.Command(self, "-serve-bare", addr, flag, f.Name())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		os.Remove(f.Name()) //nolint:errcheck // best effort: the start error is the one to report
		return nil, err
	}
	b := &Bare{Addr: addr, cmd: cmd, bodyFile: f.Name()}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Stop()
			return nil, fmt.Errorf("baseline server did not start on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the baseline server and removes its body file.
func (b *Bare) Stop() {
	b.cmd.Process.Kill()  //nolint:errcheck // it may have exited already; Wait reaps it either way
	b.cmd.Wait()          //nolint:errcheck // killed: its exit status says nothing
	os.Remove(b.bodyFile) //nolint:errcheck // best effort: a body file left in -out harms nothing
}
