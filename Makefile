# Developer entry points. `make test` is the test command CI runs (.ci/run).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
BIN := bin/marketdata
# git describe fails outside a checkout or before the first commit: the version is then "dev".
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 30s

.PHONY: build run test test-short test-cluster cluster-up cluster-down lb-up lb-down fuzz bench services chromium haproxy promtool lint clean

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/marketdata

# Migrate, ingest, API and feed in one process against the local services (make services).
run: services build
	$(BIN) dev

# ./... includes the cluster suite (internal/clustertest): it starts its own topology with
# deploy/local/cluster.sh on ports 32001-32016, 32221-32250 and 32432-32433.
test: services chromium haproxy promtool lint
	$(GO) test -count=1 -p 2 -timeout 20m ./...

# The unit tests alone, with no service: under -short every test that needs
# Postgres, Redis, NATS or a server of its own skips (testenv.Integration).
test-short:
	$(GO) test -short -count=1 -p 2 -timeout 10m ./...

# The cluster suite alone, verbose: setup and per-test timings, failover figures.
test-cluster:
	$(GO) test -count=1 -v -timeout 10m ./internal/clustertest/

# The cluster topology by hand (CLUSTER_DIR, default /tmp/marketdata-cluster); `bash
# deploy/local/cluster.sh env` prints the MD_* variables that point marketdata at it.
cluster-up:
	bash deploy/local/cluster.sh up

cluster-down:
	bash deploy/local/cluster.sh down --purge

# HAProxy in front of three API nodes on loopback (deploy/local/lb.sh; LB_DIR, default
# /tmp/marketdata-lb): clients use http://127.0.0.1:32480. Run ingest beside it (make run, or
# bin/marketdata ingest). The balancer suite (internal/lbtest) starts its own.
lb-up: build
	bash deploy/local/lb.sh up

lb-down:
	bash deploy/local/lb.sh down

# Runs every fuzz target for FUZZTIME, one at a time: `go test -fuzz` takes one package and
# one target per run. `go test -list` prints each package's targets, then its "ok" line.
fuzz:
	@listing=$$($(GO) test -list 'Fuzz.*' ./...); \
	targets=$$(awk '/^Fuzz/ { names = names " " $$1 } \
		/^ok/ { if (names != "") print $$2 names; names = "" }' <<<"$$listing"); \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets"; exit 0; fi; \
	while read -r pkg names; do \
		for name in $$names; do \
			echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" </dev/null; \
		done; \
	done <<<"$$targets"

bench: build
	$(GO) run ./cmd/mdbench -bin $(BIN)

services:
	bash deploy/local/services.sh

# Debian's Chromium for the documentation site's browser test (never a browser download).
chromium:
	bash deploy/local/chromium.sh

# HAProxy and socat for the balancer suite (internal/lbtest), Debian's packages.
haproxy:
	bash deploy/local/lb.sh install

# promtool from Debian's prometheus package, for the alert rules' tests (deploy/prometheus).
promtool:
	bash deploy/local/promtool.sh

# golangci-lint runs the linters .golangci.yml chooses. `go run pkg@version` builds it from the Go
# module proxy into the build cache (about 2.5 min the first time on 2 cores, then a cached
# binary) and keeps its ~200 modules out of our go.mod: a `tool` directive would add them to
# our module graph and move five of our own dependencies to newer versions.
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

lint:
	@unformatted=$$(find . -name '*.go' -not -path './.git/*' -not -path './vendor/*' \
		-not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l); \
	if [ -n "$$unformatted" ]; then printf 'gofmt -l lists:\n%s\n' "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

clean:
	rm -rf bin
