// Package redisx opens the process's Redis clients from MD_REDIS_URL: one
// server or a Redis Cluster, with short timeouts, and for a cluster a client
// that follows failovers by itself (Cluster). It also says how Redis is
// doing, for /readyz and the metrics (Health, RegisterMetrics). What the
// keys hold is the business of the packages that use the client (cache,
// ratelimit).
package redisx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options are the Redis client options of MD_REDIS_URL, parsed once (by
// cmd/marketdata's configuration, which refuses a bad URL at start) and
// opened as often as the process needs a client.
type Options struct {
	single  *redis.Options
	cluster *redis.ClusterOptions
}

// ParseURL reads MD_REDIS_URL:
//
//   - a redis:// or rediss:// (TLS) URL with optional user and password: one
//     server;
//   - the same with one or more addr= parameters (go-redis ParseClusterURL,
//     e.g. redis://user:pass@10.0.0.1:7000?addr=10.0.0.2:7000): a Redis
//     Cluster with AUTH and TLS;
//   - comma-separated host:port addresses: a Redis Cluster without AUTH.
//
// Timeouts are short (1 s to dial, 2 s to read or write or wait for a pooled
// connection) unless the URL sets them (dial_timeout, read_timeout,
// write_timeout, pool_timeout; in a URL, go-redis reads 0 or less as "no
// timeout"). This is the one place those defaults are applied. Errors never
// quote the URL, which may hold a password.
func ParseURL(v string) (Options, error) {
	if IsClusterURL(v) {
		var opt *redis.ClusterOptions
		if strings.Contains(v, "://") {
			var err error
			if opt, err = redis.ParseClusterURL(v); err != nil {
				return Options{}, fmt.Errorf("redisx: parse redis cluster url: %w", urlError(err))
			}
		} else {
			var addrs []string
			for a := range strings.SplitSeq(v, ",") {
				a = strings.TrimSpace(a)
				if err := checkAddr(a); err != nil {
					return Options{}, fmt.Errorf("redisx: want a redis:// URL or comma-separated cluster addresses: %w", err)
				}
				addrs = append(addrs, a)
			}
			opt = &redis.ClusterOptions{Addrs: addrs}
		}
		clusterDefaults(opt)
		return Options{cluster: opt}, nil
	}
	opt, err := redis.ParseURL(v)
	if err != nil {
		return Options{}, fmt.Errorf("redisx: parse redis url: %w", urlError(err))
	}
	clientDefaults(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout)
	return Options{single: opt}, nil
}

// checkAddr checks one host:port of a cluster address list.
func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q has no valid port", a)
	}
	return nil
}

// IsCluster reports whether o names a Redis Cluster.
func (o Options) IsCluster() bool { return o.cluster != nil }

// Open returns a client for o without dialling. A cluster client is a
// *Cluster, which follows failovers by itself. The client connects on first
// use and reconnects by itself, so a process can start while Redis is down.
// Each call gets a client of its own (copies of the options).
func (o Options) Open() redis.UniversalClient {
	if o.cluster != nil {
		opt := *o.cluster
		return newCluster(&opt)
	}
	if o.single == nil {
		panic("redisx: Open of zero Options; use ParseURL")
	}
	opt := *o.single
	return redis.NewClient(&opt)
}

// Open parses url (ParseURL) and opens a client for it: for tests and tools
// that hold a URL rather than a process configuration.
func Open(url string) (redis.UniversalClient, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	return o.Open(), nil
}

// Connect opens a client for o and checks that Redis answers.
func Connect(ctx context.Context, o Options) (redis.UniversalClient, error) {
	rdb := o.Open()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redisx: ping redis: %w", err)
	}
	return rdb, nil
}

// clientDefaults sets the timeouts of a Redis client the URL left unset.
func clientDefaults(dial, read, write, pool *time.Duration) {
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{dial, dialTimeout}, {read, ioTimeout}, {write, ioTimeout}, {pool, poolTimeout}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
}

// urlError drops the URL from a parse error: net/url's *url.Error quotes
// the whole URL, password included. What is left says which part was wrong.
func urlError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		var eerr url.EscapeError
		if errors.As(uerr.Err, &eerr) {
			// It quotes the bad escape, which may be part of the password.
			return fmt.Errorf("%s: invalid %%-escape in the URL", uerr.Op)
		}
		return fmt.Errorf("%s: %w", uerr.Op, uerr.Err)
	}
	return err
}

// IsClusterURL reports whether MD_REDIS_URL names a Redis Cluster: a URL
// with addr= parameters, or addresses without a scheme.
func IsClusterURL(url string) bool {
	if !strings.HasPrefix(url, "redis://") && !strings.HasPrefix(url, "rediss://") {
		return true
	}
	_, query, _ := strings.Cut(url, "?")
	for p := range strings.SplitSeq(query, "&") {
		if strings.HasPrefix(p, "addr=") {
			return true
		}
	}
	return false
}
