package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/ingest"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(envOf(nil), secretsUnused)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.AdminAddr != "127.0.0.1:9090" || c.RateLimit != 1200 ||
		c.RateWindow != time.Minute || c.AuthFailLimit != 20 || c.AuthFailWindow != 300*time.Second ||
		c.ResolvedRetention != 168*time.Hour || c.DatabaseReadURL != c.DatabaseURL || c.RedisPrefix != "md:" ||
		c.MaxConns != 20000 || c.KeyStaleMax != 10*time.Minute || c.StreamReplicas != 1 ||
		c.DocsAddr != "127.0.0.1:8081" || c.DocsOrigin != "http://127.0.0.1:8081" ||
		len(c.DocsAPIURLs) != 1 || c.DocsAPIURLs[0] != "http://127.0.0.1:8080" {
		t.Errorf("defaults: got %+v", c)
	}
}

// TestLoadConfigErrorsNameTheVariable: every bad value is refused at start
// with the variable's name in the message.
func TestLoadConfigErrorsNameTheVariable(t *testing.T) {
	cases := []struct {
		name, value string
		secrets     secretsMode
	}{
		{"MD_HTTP_ADDR", "localhost", secretsUnused},
		{"MD_ADMIN_ADDR", "127.0.0.1:99999", secretsUnused},
		{"MD_DATABASE_URL", "postgres://%zz", secretsUnused},
		{"MD_DATABASE_READ_URL", "postgres://%zz", secretsUnused},
		{"MD_REDIS_URL", "nohost", secretsUnused},
		{"MD_NATS_URL", "::::", secretsUnused},
		{"MD_RATE_LIMIT", "0", secretsUnused},
		{"MD_RATE_LIMIT", "1.5", secretsUnused},
		{"MD_RATE_LIMIT", "many", secretsUnused},
		{"MD_RATE_WINDOW", "60", secretsUnused},
		{"MD_RATE_WINDOW", "0s", secretsUnused},
		{"MD_RATE_WINDOW", "500ms", secretsUnused},
		{"MD_AUTHFAIL_LIMIT", "-1", secretsUnused},
		{"MD_AUTHFAIL_LIMIT", "0", secretsUnused},
		{"MD_AUTHFAIL_WINDOW", "0s", secretsUnused},
		{"MD_AUTHFAIL_WINDOW", "999ms", secretsUnused},
		{"MD_AUTHFAIL_WINDOW", "-5m", secretsUnused},
		{"MD_DOCS_ORIGIN", "docs.example.com", secretsUnused},
		{"MD_DOCS_ADDR", "8081", secretsUnused},
		{"MD_DOCS_API_URL", "api.example.com", secretsUnused},
		{"MD_DOCS_API_URL", "https://api.example.com,ftp://x", secretsUnused},
		{"MD_DOCS_API_URL", "https://user:pw@api.example.com", secretsUnused},
		{"MD_APP_ORIGINS", "https://ok.example,ftp://bad.example", secretsUnused},
		{"MD_TRUSTED_PROXIES", "10.0.0.0/33", secretsUnused},
		{"MD_RESOLVED_RETENTION", "week", secretsUnused},
		{"MD_RESOLVED_RETENTION", "0s", secretsUnused},
		{"MD_RESOLVED_RETENTION", "-1h", secretsUnused},
		{"MD_REDIS_PREFIX", "md{x}:", secretsUnused},
		{"MD_MAX_CONNS", "0", secretsUnused},
		{"MD_MAX_CONNS", "many", secretsUnused},
		{"MD_MAX_CONNS", "-1", secretsUnused},
		{"MD_KEY_STALE_MAX", "-1m", secretsUnused},
		{"MD_KEY_STALE_MAX", "ten", secretsUnused},
		{"MD_STREAM_REPLICAS", "0", secretsUnused},
		{"MD_STREAM_REPLICAS", "6", secretsUnused},
		{"MD_STREAM_REPLICAS", "three", secretsUnused},
		{"MD_CURSOR_SECRET", "short", secretsRequired},
		{"MD_KEY_PEPPER", "short", secretsRequired},
		{"MD_KEY_PEPPER", "short", secretsPepper},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			env := map[string]string{c.name: c.value}
			if c.secrets == secretsRequired || c.secrets == secretsPepper {
				for _, s := range []string{"MD_CURSOR_SECRET", "MD_KEY_PEPPER"} {
					if s != c.name {
						env[s] = strings.Repeat("s", 32)
					}
				}
			}
			_, err := LoadConfig(envOf(env), c.secrets)
			if err == nil || !strings.HasPrefix(err.Error(), c.name+": ") {
				t.Errorf("got %v, want an error starting with %q", err, c.name+": ")
			}
		})
	}
}

// TestDocsAPIURLs: MD_DOCS_API_URL as given (trailing slashes dropped), or
// the API node of MD_HTTP_ADDR as a browser on this machine reaches it.
func TestDocsAPIURLs(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{"http://127.0.0.1:8080"}},
		{map[string]string{"MD_HTTP_ADDR": "0.0.0.0:9000"}, []string{"http://127.0.0.1:9000"}},
		{map[string]string{"MD_HTTP_ADDR": ":9000"}, []string{"http://127.0.0.1:9000"}},
		{map[string]string{"MD_HTTP_ADDR": "10.1.2.3:80"}, []string{"http://10.1.2.3:80"}},
		{map[string]string{"MD_DOCS_API_URL": " https://api.example.com/ , http://127.0.0.1:8080/gw "},
			[]string{"https://api.example.com", "http://127.0.0.1:8080/gw"}},
	} {
		cfg, err := LoadConfig(envOf(c.env), secretsUnused)
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if strings.Join(cfg.DocsAPIURLs, " ") != strings.Join(c.want, " ") {
			t.Errorf("%v: DocsAPIURLs %q, want %q", c.env, cfg.DocsAPIURLs, c.want)
		}
	}
}

// TestDocsAPIURLsOfBoundAddr: `marketdata dev` gives the docs site the
// address the API node bound; an unspecified host becomes the loopback
// address a browser on this machine can call.
func TestDocsAPIURLsOfBoundAddr(t *testing.T) {
	for bound, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		"[::]:8080":      "http://127.0.0.1:8080",
		"127.0.0.1:4321": "http://127.0.0.1:4321",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		got, err := docsAPIURLs("", bound)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("bound %s: API URLs %q, %v; want [%s]", bound, got, err, want)
		}
	}
}

// TestLoadConfigZeroMeans: the one variable whose 0 is accepted says what
// it means (MD_KEY_STALE_MAX 0: a key is never served stale); every other 0
// is refused above.
func TestLoadConfigZeroMeans(t *testing.T) {
	c, err := LoadConfig(envOf(map[string]string{"MD_KEY_STALE_MAX": "0"}), secretsUnused)
	if err != nil || c.KeyStaleMax != 0 {
		t.Errorf("MD_KEY_STALE_MAX=0: got %v, %v; want 0 accepted", c, err)
	}
}

// TestLoadConfigDefaultsAreThePackages: where a package owns a value, the
// variable's default is the package's (one home for each default).
func TestLoadConfigDefaultsAreThePackages(t *testing.T) {
	c, err := LoadConfig(envOf(nil), secretsUnused)
	if err != nil {
		t.Fatal(err)
	}
	a, i := api.DefaultConfig(), ingest.DefaultConfig()
	if c.MaxConns != a.MaxConns || c.KeyStaleMax != a.KeyStaleMax || c.StreamReplicas != i.Replicas {
		t.Errorf("got MaxConns %d, KeyStaleMax %s, StreamReplicas %d; want api's %d, %s and ingest's %d",
			c.MaxConns, c.KeyStaleMax, c.StreamReplicas, a.MaxConns, a.KeyStaleMax, i.Replicas)
	}
}

func TestLoadConfigSecrets(t *testing.T) {
	if _, err := LoadConfig(envOf(nil), secretsRequired); err == nil || !strings.HasPrefix(err.Error(), "MD_CURSOR_SECRET: required") {
		t.Errorf("required secrets unset: got %v, want MD_CURSOR_SECRET: required", err)
	}
	c, err := LoadConfig(envOf(map[string]string{
		"MD_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7 ,::1", "MD_APP_ORIGINS": "https://app.example.com",
	}), secretsUnused)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TrustedProxies) != 3 || c.TrustedProxies[1].Bits() != 32 || len(c.AppOrigins) != 1 {
		t.Errorf("lists: got proxies %v origins %v", c.TrustedProxies, c.AppOrigins)
	}
}

// TestFlagRefusals: every flag with a bad value is refused before the
// command does anything, with the flag's name leading the one-line reason.
// 0 and negative values are refused wherever they mean nothing documented
// (--rate 0, --duration 0 and --max-messages 0 mean something: see
// docs/configuration.md).
func TestFlagRefusals(t *testing.T) {
	secrets := map[string]string{"MD_CURSOR_SECRET": strings.Repeat("c", 32), "MD_KEY_PEPPER": strings.Repeat("p", 32)}
	cases := []struct {
		flag string
		args []string
	}{
		{"--batch-size", []string{"ingest", "--batch-size", "0"}},
		{"--batch-size", []string{"ingest", "--batch-size", "10001"}},
		{"--linger", []string{"ingest", "--linger", "0"}},
		{"--linger", []string{"ingest", "--linger", "-1ms"}},
		{"--linger", []string{"ingest", "--linger", "1001ms"}},
		{"--appliers", []string{"ingest", "--appliers", "0"}},
		{"--appliers", []string{"ingest", "--appliers", "65"}},
		{"--ack-wait", []string{"ingest", "--ack-wait", "0"}},
		{"--ack-wait", []string{"ingest", "--ack-wait", "999ms"}},
		{"--replicas", []string{"ingest", "--replicas", "0"}},
		{"--replicas", []string{"ingest", "--replicas", "6"}},
		{"--stream", []string{"ingest", "--stream", ""}},
		{"--stream", []string{"ingest", "--stream", "MD.X"}},
		{"--stream", []string{"ingest", "--stream", "MD X"}},
		{"--dlq-stream", []string{"ingest", "--dlq-stream", "MD*"}},
		{"--dlq-stream", []string{"ingest", "--stream", "S", "--dlq-stream", "S"}},
		{"--consumer", []string{"ingest", "--consumer", "a>b"}},
		{"--consumer", []string{"ingest", "--consumer", ""}},
		{"--subject-prefix", []string{"ingest", "--subject-prefix", ""}},
		{"--subject-prefix", []string{"ingest", "--subject-prefix", "a..b"}},
		{"--subject-prefix", []string{"ingest", "--subject-prefix", "a.*"}},
		{"--dlq-prefix", []string{"ingest", "--dlq-prefix", "a b"}},
		{"--dlq-prefix", []string{"ingest", "--subject-prefix", "x", "--dlq-prefix", "x.dlq"}},
		{"--notice-subject", []string{"ingest", "--notice-subject", ">"}},
		{"--notice-subject", []string{"ingest", "--subject-prefix", "x", "--notice-subject", "x.changes"}},
		{"--events", []string{"feed", "--events", "0"}},
		{"--events", []string{"feed", "--events", "1000001"}},
		{"--rate", []string{"feed", "--rate", "-1"}},
		{"--rate", []string{"feed", "--rate", "-1/s"}},
		{"--rate", []string{"feed", "--rate", "NaN"}},
		{"--rate", []string{"feed", "--rate", "fast"}},
		{"--duration", []string{"feed", "--duration", "-1s"}},
		{"--max-messages", []string{"feed", "--max-messages", "-1"}},
		{"--event-life", []string{"feed", "--event-life", "-1s"}},
		{"--event-life", []string{"dev", "--event-life", "-1h"}},
		{"--replicas", []string{"feed", "--replicas", "0"}},
		{"--stream", []string{"feed", "--stream", "a/b"}},
		{"--subject-prefix", []string{"feed", "--subject-prefix", "x.>"}},
		{"--events", []string{"dev", "--events", "0"}},
		{"--notice-subject", []string{"api", "--notice-subject", ""}},
		{"--notice-subject", []string{"api", "--notice-subject", "a b"}},
		{"--notice-subject", []string{"cache", "rebuild", "--notice-subject", "*"}},
		{"--expires-in", []string{"key", "create", "--account", "a", "--scopes", "markets:read", "--expires-in", "0"}},
		{"--expires-in", []string{"key", "create", "--account", "a", "--scopes", "markets:read", "--expires-in", "366d"}},
		{"--log-level", []string{"ingest", "--log-level", "loud"}},
		{"--log-format", []string{"ingest", "--log-format", "xml"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := run(t, secrets, c.args...)
			// Our own checks lead with the flag; a value the flag's type
			// cannot parse is refused by the flag parser, which names it too.
			if err == nil || !(strings.HasPrefix(err.Error(), c.flag+": ") || strings.Contains(err.Error(), `"`+c.flag+`" flag`)) {
				t.Errorf("got %v, want a refusal naming %s", err, c.flag)
			}
		})
	}
}

// TestFlagDefaultsAreTheContracts: ingest's flags default to
// ingest.DefaultConfig, which passes the flags' own checks; the bounds of
// --linger are accepted.
func TestFlagDefaultsAreTheContracts(t *testing.T) {
	fs := pflag.NewFlagSet("ingest", pflag.ContinueOnError)
	var ic ingest.Config
	ingestFlags(fs, &ic)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := ingest.DefaultConfig()
	want.Replicas = 0 // MD_STREAM_REPLICAS decides unless --replicas is given
	if ic != want {
		t.Errorf("flag defaults: got %+v, want %+v", ic, want)
	}
	ic.Replicas = 1
	for _, linger := range []time.Duration{time.Nanosecond, time.Millisecond, time.Second} {
		ic.Linger = linger
		if err := validateIngest(&ic); err != nil {
			t.Errorf("--linger %s: got %v, want accepted", linger, err)
		}
	}
}

// TestRateFlag: --rate takes 200 and 200/s alike (contract §1).
func TestRateFlag(t *testing.T) {
	for in, want := range map[string]float64{"200": 200, "200/s": 200, "0": 0, "0.5/s": 0.5, " 7/s": 7} {
		var r rateValue
		if err := r.Set(in); err != nil || float64(r) != want {
			t.Errorf("--rate %q: got %v, %v; want %v", in, float64(r), err, want)
		}
	}
	for _, in := range []string{"", "/s", "200/m", "200 /s", "fast"} {
		var r rateValue
		if err := r.Set(in); err == nil {
			t.Errorf("--rate %q: got %v, want refused", in, float64(r))
		}
	}
}

// TestConfigExitCode runs the binary (this test binary as the CLI, see
// TestMain): a bad variable or flag exits 1 with one line on stderr,
// "marketdata: <name>: <reason>", and nothing on stdout (contract §1).
func TestConfigExitCode(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"MD_RATE_LIMIT", []string{"MD_RATE_LIMIT=0"}, []string{"ingest"}},
		{"MD_AUTHFAIL_WINDOW", []string{"MD_AUTHFAIL_WINDOW=100ms"}, []string{"feed"}},
		{"--linger", nil, []string{"ingest", "--linger", "0"}},
		{"--rate", nil, []string{"feed", "--rate", "-3/s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], c.args...)
			// Only this case's variables: none of the test's own MD_*.
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "MD_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(append(cmd.Env, drillMainEnv+"=1"), c.env...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("got %v, want exit status 1 (stderr %q)", err, stderr.String())
			}
			if got := stderr.String(); !strings.HasPrefix(got, "marketdata: "+c.name+": ") || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
				t.Errorf("stderr: got %q, want one line starting %q", got, "marketdata: "+c.name+": ")
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: got %q, want nothing", stdout.String())
			}
		})
	}
}

// TestConfigurationDocumented: docs/configuration.md names every variable
// and every flag of the long-running commands, so the table of what each
// accepts cannot silently miss one.
func TestConfigurationDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"MD_DATABASE_READ_URL": true, "MD_APP_ORIGINS": true, "MD_TRUSTED_PROXIES": true,
		"MD_CURSOR_SECRET": true, "MD_KEY_PEPPER": true, "--expires-in": true, "MD_DOCS_API_URL": true}
	for name := range envDefaults() {
		names[name] = true
	}
	root := newRoot(envOf(nil), nil, nil)
	for _, path := range [][]string{{"api"}, {"ingest"}, {"feed"}, {"dev"}, {"cache", "rebuild"}, {"docs"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		add := func(f *pflag.Flag) { names["--"+f.Name] = f.Name != "help" }
		cmd.InheritedFlags().VisitAll(add)
		cmd.LocalFlags().VisitAll(add)
	}
	for name, want := range names {
		if want && !strings.Contains(string(doc), "`"+name+"`") && !strings.Contains(string(doc), "`"+name+" ") {
			t.Errorf("docs/configuration.md does not name `%s`", name)
		}
	}
}

// TestOriginsNormalised: the API compares a request's Origin byte for byte
// with the configured ones, and browsers send lower case, no trailing slash
// and no default port; a configured origin written otherwise would never
// match and CORS would fail without a word.
func TestOriginsNormalised(t *testing.T) {
	c, err := LoadConfig(envOf(map[string]string{
		"MD_DOCS_ORIGIN": "HTTPS://Docs.Example.COM:443/",
		"MD_APP_ORIGINS": "http://App.example.com:80, http://[::1]:8081/, https://x.example.com:8443",
	}), secretsUnused)
	if err != nil {
		t.Fatal(err)
	}
	if c.DocsOrigin != "https://docs.example.com" {
		t.Errorf("MD_DOCS_ORIGIN read as %q, want https://docs.example.com", c.DocsOrigin)
	}
	want := []string{"http://app.example.com", "http://[::1]:8081", "https://x.example.com:8443"}
	if !slices.Equal(c.AppOrigins, want) {
		t.Errorf("MD_APP_ORIGINS read as %q, want %q", c.AppOrigins, want)
	}
	for _, bad := range []string{"https://u:p@docs.example.com", "https://docs.example.com/#x", "https://docs.example.com/path"} {
		if _, err := LoadConfig(envOf(map[string]string{"MD_DOCS_ORIGIN": bad}), secretsUnused); err == nil {
			t.Errorf("MD_DOCS_ORIGIN %q accepted", bad)
		}
	}
}
