package measure

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// table lays rows out in aligned columns (cells separated by \t) and prints
// them on stdout at once. Rows wait in a buffer, so only print can fail, and
// a table that cannot be printed is said on stderr.
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func NewTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

// Rowf adds a row; format ends it with \n.
func (t *table) Rowf(format string, args ...any) {
	fmt.Fprintf(t.tw, format, args...) //nolint:errcheck // into t.buf, which never fails a write
}

// Print writes the table on stdout.
func (t *table) Print() {
	err := t.tw.Flush()
	if err == nil {
		_, err = os.Stdout.Write(t.buf.Bytes())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdbench: table not printed:", err)
	}
}

func Met(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

// Cores lists CPU use per group, largest first, in cores.
func Cores(c map[string]float64) string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case c[a] > c[b]:
			return -1
		case c[a] < c[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, c[n])
	}
	if len(parts) == 0 {
		return "cores: n/a"
	}
	return "cores: " + strings.Join(parts, ", ")
}

// GoalCheck is one of the goals and this run's figure for it.
type GoalCheck struct {
	Goal  string  `json:"goal"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}
