package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
)

// readers are the long-running commands whose behaviour a variable sets.
// `marketdata dev` runs all of them, so it reads what any of them reads.
type readers uint8

const (
	forAPI readers = 1 << iota
	forIngest
	forFeed
	forDocs
)

// envVar is one variable of contract §1.
type envVar struct {
	name string
	// def is what an unset or blank variable takes; when there is none,
	// noDefault says what happens instead ("required", "none", "default: …").
	def, noDefault string
	meaning        string
	readers        readers
	// dev is what `marketdata dev` does when the variable is unset, where
	// that differs from def.
	dev string
}

// envTable is the one table of the variables: LoadConfig takes its defaults
// from it (envDefaults) and the commands' --help lists it (envHelp). Where a
// package owns a value, the default is the package's.
func envTable() []envVar {
	a, i := api.DefaultConfig(), ingest.DefaultConfig()
	return []envVar{
		{name: "MD_HTTP_ADDR", def: "127.0.0.1:8080", meaning: "API listen address", readers: forAPI | forDocs},
		{name: "MD_ADMIN_ADDR", def: "127.0.0.1:9090", meaning: "/metrics, /healthz, /readyz", readers: forAPI | forIngest,
			dev: "ingest's admin address; the API's takes a free port, shown in the banner"},
		{name: "MD_DATABASE_URL", def: "postgres://postgres@127.0.0.1:5432/marketdata?sslmode=disable", meaning: "Postgres primary",
			readers: forAPI | forIngest},
		{name: "MD_DATABASE_READ_URL", noDefault: "default: MD_DATABASE_URL", meaning: "read replica used by API reads", readers: forAPI},
		{name: "MD_REDIS_URL", def: "redis://127.0.0.1:6379/0", meaning: "Redis URL, or cluster addresses", readers: forAPI | forIngest},
		{name: "MD_REDIS_PREFIX", def: cache.DefaultPrefix, meaning: "prefix of every Redis key", readers: forAPI | forIngest},
		{name: "MD_NATS_URL", def: "nats://127.0.0.1:4222", meaning: "NATS URL; comma-separated for a cluster", readers: forAPI | forIngest | forFeed},
		{name: "MD_RATE_LIMIT", def: "1200", meaning: "requests per window, per account", readers: forAPI},
		{name: "MD_RATE_WINDOW", def: "60s", meaning: "the per-account window", readers: forAPI},
		{name: "MD_AUTHFAIL_LIMIT", def: "20", meaning: "failed authentications per client address per window", readers: forAPI,
			dev: "not applied to loopback clients"},
		{name: "MD_AUTHFAIL_WINDOW", def: "300s", meaning: "the failed-authentication window", readers: forAPI},
		{name: "MD_DOCS_ORIGIN", def: "http://127.0.0.1:8081", meaning: "the documentation site's origin (CORS)", readers: forAPI | forDocs,
			dev: "follows MD_DOCS_ADDR"},
		{name: "MD_APP_ORIGINS", noDefault: "none", meaning: "comma-separated origins of your own web apps (CORS)", readers: forAPI},
		{name: "MD_TRUSTED_PROXIES", noDefault: "none", meaning: "CIDRs whose X-Forwarded-For is believed", readers: forAPI},
		{name: "MD_CURSOR_SECRET", noDefault: "required", meaning: "HMAC key for cursors, the same on every API node", readers: forAPI,
			dev: "made once and kept in dev's state file"},
		{name: "MD_KEY_PEPPER", noDefault: "required", meaning: "HMAC key under which key secrets are hashed", readers: forAPI,
			dev: "made once and kept in dev's state file"},
		{name: "MD_RESOLVED_RETENTION", def: "168h", meaning: `how long a resolved market counts as "recently resolved"`, readers: forIngest},
		{name: "MD_DOCS_ADDR", def: "127.0.0.1:8081", meaning: "where the documentation site is served", readers: forDocs},
		{name: "MD_DOCS_API_URL", noDefault: "default: http://MD_HTTP_ADDR", meaning: "API base URLs the try-it panel calls, comma-separated", readers: forDocs,
			dev: "the API as dev bound it"},
		{name: "MD_MAX_CONNS", def: strconv.Itoa(a.MaxConns), meaning: "open connections per API node", readers: forAPI,
			dev: "lowered to fit under the open-file limit"},
		{name: "MD_KEY_STALE_MAX", def: a.KeyStaleMax.String(), meaning: "how long a key seen is used while Postgres is down", readers: forAPI},
		{name: "MD_STREAM_REPLICAS", def: strconv.Itoa(i.Replicas), meaning: "replicas of the streams ingest and feed create", readers: forIngest | forFeed},
	}
}

// envDefaults are the defaults of the variables that have one, from
// envTable.
func envDefaults() map[string]string {
	m := map[string]string{}
	for _, v := range envTable() {
		if v.def != "" {
			m[v.name] = v.def
		}
	}
	return m
}

// envHelp is the "Environment" section of a command's --help: the
// variables read by any of r, with their defaults (never their values: a
// secret has no default to show). dev adds dev's own defaults.
func envHelp(r readers, dev bool) string {
	var b strings.Builder
	b.WriteString("Environment (flags override):\n")
	for _, v := range envTable() {
		if v.readers&r == 0 {
			continue
		}
		def := v.shown()
		if dev && v.dev != "" {
			def += "; in dev: " + v.dev
		}
		fmt.Fprintf(&b, "  %-22s %s (%s)\n", v.name, v.meaning, def)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// shown is the variable's default as --help shows it.
func (v envVar) shown() string {
	if v.def != "" {
		return "default: " + v.def
	}
	return v.noDefault
}
