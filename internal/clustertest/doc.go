// Package clustertest holds the cluster suite: the real marketdata
// binaries run against the loopback topology of deploy/local/cluster.sh
// (Redis Cluster 3+3, a 3-node NATS cluster with R3 streams, a Postgres
// primary with a streaming replica), which TestMain starts and stops.
//
// The package has tests only. Its ports (Redis 32001-32006, NATS 32221-32223
// and 32248-32250, Postgres 32432-32433) are its own, so it runs beside the
// tests that use the shared services. Outside CI a missing binary skips the
// suite; with CI=true it fails it.
package clustertest
