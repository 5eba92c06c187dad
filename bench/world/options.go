// Package world is what every benchmark runs in: the options (the binary,
// the services), a sandbox of its own on the shared services, the binary as
// child processes (started by servicetest's harness), API nodes with their
// keys, ingest, and the synthetic worlds with the publishers that feed them.
package world

import (
	"time"
)

// Options are what every benchmark shares: the binary and the services.
type Options struct {
	// Bin is the absolute path of the marketdata binary under test.
	Bin string
	// Out is the directory that receives <bench>.json and child logs.
	Out string
	// PostgresURL names the server's maintenance database (sandboxes create
	// their own next to it).
	PostgresURL string
	// RedisURL and NATSURL are the local Redis and NATS servers.
	RedisURL, NATSURL string
	// Machine describes where the run happens; every result carries it.
	Machine Machine
	// Usage counts usage in the API nodes (the default, as in production);
	// false starts them with --usage=false, for issue 11's comparison of
	// the same run with counting on and off.
	Usage bool
	// Profile asks the reads benchmark for a CPU profile of every route,
	// the stream benchmark for one of the node in its steady phase.
	Profile bool
}

// Failer is a result that ran but found a fault that must fail the run
// (after its JSON is written): a broken promise, not a missed speed goal.
type Failer interface {
	Failure() error
}

// Machine is the machine facts every result records.
type Machine struct {
	NumCPU     int       `json:"nproc"`
	GoVersion  string    `json:"go_version"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	Hostname   string    `json:"hostname"`
	Date       time.Time `json:"date"`
	LoadAvg    string    `json:"loadavg_at_start"`
	BinVersion string    `json:"bin_version"`
}
