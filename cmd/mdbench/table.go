package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"
)

// table lays rows out in aligned columns (cells separated by \t) and prints
// them on stdout at once. Rows wait in a buffer, so only print can fail, and
// a table that cannot be printed is said on stderr.
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

// rowf adds a row; format ends it with \n.
func (t *table) rowf(format string, args ...any) {
	fmt.Fprintf(t.tw, format, args...) //nolint:errcheck // into t.buf, which never fails a write
}

// print writes the table on stdout.
func (t *table) print() {
	err := t.tw.Flush()
	if err == nil {
		_, err = os.Stdout.Write(t.buf.Bytes())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdbench: table not printed:", err)
	}
}

// stopNode stops an API child for a deferred call: its stop error changes
// no figure, so it is logged.
func stopNode(n *APINode, log *slog.Logger) {
	if err := n.Stop(10 * time.Second); err != nil {
		log.Warn("api stop", "pid", n.Pid(), "err", err)
	}
}
