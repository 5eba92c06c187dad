package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/gofiber/fiber/v2"
)

// serveBare is the baseline server: a bare Fiber handler returning body
// for every GET, run by `mdbench -serve-bare ADDR -bare-body FILE` as a
// process of its own, like the API node it is compared with.
func serveBare(addr, bodyFile string) error {
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		return err
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/*", func(c *fiber.Ctx) error {
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
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "bare-body-*.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(body); err != nil {
		os.Remove(f.Name()) //nolint:errcheck
		return nil, err
	}
	cmd := exec.Command(self, "-serve-bare", addr, "-bare-body", f.Name())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		os.Remove(f.Name()) //nolint:errcheck
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
	b.cmd.Process.Kill()  //nolint:errcheck
	b.cmd.Wait()          //nolint:errcheck
	os.Remove(b.bodyFile) //nolint:errcheck
}
