// Command marketdata is the one binary of the service: API nodes, ingest
// workers, migrations, the synthetic feed and operator commands.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(os.Getenv, os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "marketdata:", err)
		os.Exit(1)
	}
}

// cli carries what every subcommand shares.
type cli struct {
	getenv    func(string) string
	stdout    io.Writer
	stderr    io.Writer
	json      bool
	logFormat string
	logLevel  string
}

func newRoot(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "marketdata",
		Short:         "Prediction-market data matched across venues: API, ingest and tools",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print the result as one JSON object on stdout")
	root.PersistentFlags().StringVar(&c.logFormat, "log-format", "json", "log format on stderr: json or text")
	root.PersistentFlags().StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(
		c.apiCmd(),
		c.migrateCmd(),
		c.ingestCmd(),
		c.feedCmd(),
		c.cacheCmd(),
		c.devCmd(),
		c.docsCmd(),
		c.accountCmd(),
		c.accessCmd(),
		c.keyCmd(),
	)
	return root
}

func (c *cli) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch c.logFormat {
	case "json":
		log = slog.New(slog.NewJSONHandler(c.stderr, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(c.stderr, opts))
	default:
		return nil, fmt.Errorf("--log-format: %q is not json or text", c.logFormat)
	}
	// go-redis logs on its own, in plain text: through ours instead.
	installRedisLog(log)
	return log, nil
}

// print writes a command's result: JSON with --json, else the text form.
func (c *cli) print(v any, text string) error {
	if c.json {
		return json.NewEncoder(c.stdout).Encode(v)
	}
	_, err := fmt.Fprintln(c.stdout, text)
	return err
}
