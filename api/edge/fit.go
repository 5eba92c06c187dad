package edge

// fileReserve is what a node needs beside client connections: its
// listeners, Postgres, Redis and NATS connections, the runtime's own.
const fileReserve = 256

// FitConns is the most client connections, up to maxConns, that fit under an
// open-file limit of nofile beside what the node needs for itself (the
// reserve WarnFileLimit checks): maxConns when it fits, else nofile less the
// reserve, and never below 1.
func FitConns(maxConns int, nofile uint64) int {
	if uint64(maxConns)+fileReserve <= nofile {
		return maxConns
	}
	if nofile <= fileReserve+1 {
		return 1
	}
	return int(nofile - fileReserve)
}
