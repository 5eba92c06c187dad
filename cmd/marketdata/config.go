package main

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/docs/site"
	"github.com/marketdata/marketdata/internal/redisx"
)

// Config is the process configuration of contract §1, read once from the
// environment and validated; every error names its variable.
type Config struct {
	HTTPAddr        string
	AdminAddr       string
	DatabaseURL     string
	DatabaseReadURL string
	RedisURL        string
	// Redis is MD_REDIS_URL parsed, with the client timeouts set.
	Redis          redisx.Options
	RedisPrefix    string
	NATSURL        string
	RateLimit      int
	RateWindow     time.Duration
	AuthFailLimit  int
	AuthFailWindow time.Duration
	DocsOrigin     string
	// DocsAddr is where `marketdata docs` listens (MD_DOCS_ADDR).
	DocsAddr string
	// DocsAPIURLs are the API base URLs the documentation site's try-it
	// panel may call (MD_DOCS_API_URL, comma-separated; default
	// "http://" + MD_HTTP_ADDR). The first fills the panel's field.
	DocsAPIURLs       []string
	AppOrigins        []string
	TrustedProxies    []netip.Prefix
	CursorSecret      []byte
	KeyPepper         []byte
	ResolvedRetention time.Duration
	// MaxConns caps open connections per API node (MD_MAX_CONNS).
	MaxConns int
	// KeyStaleMax is how long an API node keeps using a key it has seen
	// while Postgres cannot be reached (MD_KEY_STALE_MAX; 0 = never).
	KeyStaleMax time.Duration
	// StreamReplicas is the replica count of the streams ingest and feed
	// create (MD_STREAM_REPLICAS).
	StreamReplicas int
	// NoUsage turns usage counting off on an API node (the hidden
	// `marketdata api --usage=false`, for benchmarks measuring what
	// counting costs); no variable sets it: the contract counts always.
	NoUsage bool
	// AuthFailExempt are client addresses the failed-authentication limit
	// does not apply to. No variable sets it: `marketdata dev` exempts
	// loopback; production counts every address (contract §2).
	AuthFailExempt []netip.Prefix
}

// minSecretLen is the shortest MD_CURSOR_SECRET / MD_KEY_PEPPER accepted.
const minSecretLen = 32

// secretsMode says what to do when a secret is unset.
type secretsMode int

const (
	secretsUnused   secretsMode = iota // the command needs neither secret
	secretsRequired                    // unset is an error
	secretsPepper                      // only MD_KEY_PEPPER, required (key creation)
)

// configError names the variable at fault.
type configError struct {
	name, reason string
}

func (e *configError) Error() string { return e.name + ": " + e.reason }

// LoadConfig reads the configuration through getenv (os.Getenv in main).
// An unset or blank variable takes its default (envTable; the read
// replica defaults to the primary); a set one is checked, and the first bad
// value is refused with the variable's name.
func LoadConfig(getenv func(string) string, secrets secretsMode) (*Config, error) {
	defaults := envDefaults()
	env := func(name string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return defaults[name]
	}
	c := &Config{
		HTTPAddr:    env("MD_HTTP_ADDR"),
		AdminAddr:   env("MD_ADMIN_ADDR"),
		DatabaseURL: env("MD_DATABASE_URL"),
		RedisURL:    env("MD_REDIS_URL"),
		RedisPrefix: env("MD_REDIS_PREFIX"),
		NATSURL:     env("MD_NATS_URL"),
		DocsOrigin:  env("MD_DOCS_ORIGIN"),
		DocsAddr:    env("MD_DOCS_ADDR"),
	}
	c.DatabaseReadURL = c.DatabaseURL
	if v := strings.TrimSpace(getenv("MD_DATABASE_READ_URL")); v != "" {
		c.DatabaseReadURL = v
	}

	var err error
	for _, a := range []struct{ name, v string }{{"MD_HTTP_ADDR", c.HTTPAddr}, {"MD_ADMIN_ADDR", c.AdminAddr}, {"MD_DOCS_ADDR", c.DocsAddr}} {
		if err := checkAddr(a.v); err != nil {
			return nil, &configError{a.name, err.Error()}
		}
	}
	for _, d := range []struct{ name, v string }{{"MD_DATABASE_URL", c.DatabaseURL}, {"MD_DATABASE_READ_URL", c.DatabaseReadURL}} {
		if _, err := pgx.ParseConfig(d.v); err != nil {
			return nil, &configError{d.name, "not a Postgres connection string: " + err.Error()}
		}
	}
	if c.Redis, err = redisx.ParseURL(c.RedisURL); err != nil {
		return nil, &configError{"MD_REDIS_URL", err.Error()}
	}
	if err := checkNATSURL(c.NATSURL); err != nil {
		return nil, &configError{"MD_NATS_URL", err.Error()}
	}
	if c.RateLimit, err = positiveInt("MD_RATE_LIMIT", env("MD_RATE_LIMIT")); err != nil {
		return nil, err
	}
	if c.RateWindow, err = windowDuration("MD_RATE_WINDOW", env("MD_RATE_WINDOW")); err != nil {
		return nil, err
	}
	if c.AuthFailLimit, err = positiveInt("MD_AUTHFAIL_LIMIT", env("MD_AUTHFAIL_LIMIT")); err != nil {
		return nil, err
	}
	if c.AuthFailWindow, err = windowDuration("MD_AUTHFAIL_WINDOW", env("MD_AUTHFAIL_WINDOW")); err != nil {
		return nil, err
	}
	if c.ResolvedRetention, err = positiveDuration("MD_RESOLVED_RETENTION", env("MD_RESOLVED_RETENTION")); err != nil {
		return nil, err
	}
	if c.MaxConns, err = positiveInt("MD_MAX_CONNS", env("MD_MAX_CONNS")); err != nil {
		return nil, err
	}
	if c.KeyStaleMax, err = time.ParseDuration(env("MD_KEY_STALE_MAX")); err != nil || c.KeyStaleMax < 0 {
		return nil, &configError{"MD_KEY_STALE_MAX", fmt.Sprintf("%q is not a duration like 10m (0 turns it off)", env("MD_KEY_STALE_MAX"))}
	}
	if c.StreamReplicas, err = positiveInt("MD_STREAM_REPLICAS", env("MD_STREAM_REPLICAS")); err != nil {
		return nil, err
	}
	if c.StreamReplicas > 5 {
		return nil, &configError{"MD_STREAM_REPLICAS", fmt.Sprintf("%d is not within 1..5 (JetStream's limit)", c.StreamReplicas)}
	}
	if c.DocsOrigin, err = parseOrigin(c.DocsOrigin); err != nil {
		return nil, &configError{"MD_DOCS_ORIGIN", err.Error()}
	}
	if c.DocsAPIURLs, err = docsAPIURLs(getenv("MD_DOCS_API_URL"), c.HTTPAddr); err != nil {
		return nil, err
	}
	for o := range strings.SplitSeq(env("MD_APP_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		origin, err := parseOrigin(o)
		if err != nil {
			return nil, &configError{"MD_APP_ORIGINS", err.Error()}
		}
		c.AppOrigins = append(c.AppOrigins, origin)
	}
	for p := range strings.SplitSeq(env("MD_TRUSTED_PROXIES"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		prefix, err := parseCIDR(p)
		if err != nil {
			return nil, &configError{"MD_TRUSTED_PROXIES", err.Error()}
		}
		c.TrustedProxies = append(c.TrustedProxies, prefix)
	}
	if c.RedisPrefix == "" || strings.ContainsAny(c.RedisPrefix, "{}*?[]\\ ") {
		return nil, &configError{"MD_REDIS_PREFIX", "must be non-empty without braces, glob characters or spaces"}
	}
	switch secrets {
	case secretsRequired:
		if c.CursorSecret, err = secret("MD_CURSOR_SECRET", getenv("MD_CURSOR_SECRET")); err != nil {
			return nil, err
		}
		fallthrough
	case secretsPepper:
		if c.KeyPepper, err = secret("MD_KEY_PEPPER", getenv("MD_KEY_PEPPER")); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func checkAddr(v string) error {
	if _, _, err := splitHostPort(v); err != nil {
		return fmt.Errorf("%q is not host:port: %v", v, err)
	}
	return nil
}

func splitHostPort(v string) (string, int, error) {
	i := strings.LastIndex(v, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("missing port")
	}
	port, err := strconv.Atoi(v[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", v[i+1:])
	}
	return v[:i], port, nil
}

// docsAPIURLs reads MD_DOCS_API_URL: comma-separated API base URLs, or
// when unset the API node of MD_HTTP_ADDR as a browser on this machine
// reaches it (an unspecified host is the loopback address).
func docsAPIURLs(v, httpAddr string) ([]string, error) {
	var out []string
	for u := range strings.SplitSeq(v, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u == "" {
			continue
		}
		if _, err := site.APIOrigin(u); err != nil {
			return nil, &configError{"MD_DOCS_API_URL", fmt.Sprintf("%q is not an API base URL like https://api.example.com", u)}
		}
		out = append(out, u)
	}
	if len(out) > 0 {
		return out, nil
	}
	host, port, _ := splitHostPort(httpAddr) // MD_HTTP_ADDR is checked first
	switch host {
	case "", "0.0.0.0", "[::]", "::":
		host = "127.0.0.1"
	}
	return []string{"http://" + host + ":" + strconv.Itoa(port)}, nil
}

func checkNATSURL(v string) error {
	for u := range strings.SplitSeq(v, ",") {
		parsed, err := url.Parse(strings.TrimSpace(u))
		if err != nil || parsed.Host == "" {
			return fmt.Errorf("%q is not a nats:// URL", u)
		}
	}
	return nil
}

// parseOrigin checks an origin and returns it as browsers send it in
// Origin, which the API compares byte for byte: scheme and host in lower
// case, no trailing slash, no default port.
func parseOrigin(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an origin like https://docs.example.com", v)
	}
	host := strings.ToLower(u.Host)
	if (u.Scheme == "http" && u.Port() == "80") || (u.Scheme == "https" && u.Port() == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, nil
}

func parseCIDR(v string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or an address", v)
}

func positiveInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, &configError{name, fmt.Sprintf("%q is not a positive integer", v)}
	}
	return n, nil
}

func positiveDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, &configError{name, fmt.Sprintf("%q is not a positive duration like 60s", v)}
	}
	return d, nil
}

// windowDuration reads a rate-limit window: at least a second, since the
// limiter counts in milliseconds and answers RateLimit-Reset and
// Retry-After in whole seconds.
func windowDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, &configError{name, fmt.Sprintf("%q is not a duration of at least 1s like 60s", v)}
	}
	return d, nil
}

func secret(name, v string) ([]byte, error) {
	if v == "" {
		return nil, &configError{name, "required (at least 32 characters; the same on every API node)"}
	}
	if len(v) < minSecretLen {
		return nil, &configError{name, fmt.Sprintf("too short: %d characters, need at least %d", len(v), minSecretLen)}
	}
	return []byte(v), nil
}
