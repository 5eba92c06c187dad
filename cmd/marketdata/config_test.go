package main

import (
	"strings"
	"testing"
	"time"
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
		c.MaxConns != 20000 || c.KeyStaleMax != 10*time.Minute || c.StreamReplicas != 1 {
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
		{"MD_RATE_WINDOW", "60", secretsUnused},
		{"MD_AUTHFAIL_LIMIT", "-1", secretsUnused},
		{"MD_AUTHFAIL_WINDOW", "0s", secretsUnused},
		{"MD_DOCS_ORIGIN", "docs.example.com", secretsUnused},
		{"MD_APP_ORIGINS", "https://ok.example,ftp://bad.example", secretsUnused},
		{"MD_TRUSTED_PROXIES", "10.0.0.0/33", secretsUnused},
		{"MD_RESOLVED_RETENTION", "week", secretsUnused},
		{"MD_REDIS_PREFIX", "md{x}:", secretsUnused},
		{"MD_MAX_CONNS", "0", secretsUnused},
		{"MD_MAX_CONNS", "many", secretsUnused},
		{"MD_KEY_STALE_MAX", "-1m", secretsUnused},
		{"MD_KEY_STALE_MAX", "ten", secretsUnused},
		{"MD_STREAM_REPLICAS", "0", secretsUnused},
		{"MD_STREAM_REPLICAS", "6", secretsUnused},
		{"MD_CURSOR_SECRET", "short", secretsRequired},
		{"MD_KEY_PEPPER", "short", secretsRequired},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			env := map[string]string{c.name: c.value}
			if c.secrets == secretsRequired {
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

func TestLoadConfigSecrets(t *testing.T) {
	if _, err := LoadConfig(envOf(nil), secretsRequired); err == nil || !strings.HasPrefix(err.Error(), "MD_CURSOR_SECRET: required") {
		t.Errorf("required secrets unset: got %v, want MD_CURSOR_SECRET: required", err)
	}
	a, err := LoadConfig(envOf(nil), secretsRandom)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadConfig(envOf(nil), secretsRandom)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.CursorSecret) < 32 || string(a.CursorSecret) == string(b.CursorSecret) || string(a.KeyPepper) == string(a.CursorSecret) {
		t.Error("dev secrets must be random per process and distinct")
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
