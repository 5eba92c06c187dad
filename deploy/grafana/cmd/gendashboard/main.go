// Command gendashboard writes the marketdata Grafana dashboard (package
// grafana) as JSON: `go generate ./deploy/grafana/` runs it to rewrite
// deploy/grafana/marketdata.json.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/marketdata/marketdata/deploy/grafana"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	b, err := grafana.JSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendashboard:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendashboard:", err)
		os.Exit(1)
	}
}
