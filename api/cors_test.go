package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// corsHeaders lists the Access-Control-* headers of an answer.
func corsHeaders(a answer) []string {
	var out []string
	for k := range a.header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			out = append(out, k)
		}
	}
	return out
}

func wantVaryOrigin(t *testing.T, a answer) {
	t.Helper()
	for _, v := range a.header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "Origin") {
				return
			}
		}
	}
	t.Errorf("Vary = %q, want it to hold Origin", a.header.Values("Vary"))
}

// TestCORS pins contract §2: the docs origin and the app origins are
// answered with their origin echoed, on errors too; their preflights 204
// allowing GET and Authorization, never credentials. Any other origin gets no
// CORS headers at all, and its preflight 400 origin_not_allowed.
func TestCORS(t *testing.T) {
	w := newWorld(t)
	n := w.node(t)
	secret, _ := w.newKey(t, keyOpts{})
	preflight := func(t *testing.T, origin string) answer {
		t.Helper()
		return n.do(t, http.MethodOptions, "/public/v1/key", http.Header{
			"Origin":                         {origin},
			"Access-Control-Request-Method":  {"GET"},
			"Access-Control-Request-Headers": {"authorization"},
		})
	}

	for _, origin := range []string{docsOrigin, appOrigin} {
		t.Run("allowed "+origin, func(t *testing.T) {
			a := n.get(t, "/public/v1/key", secret, "Origin", origin)
			wantOK(t, a)
			if got := a.header.Get("Access-Control-Allow-Origin"); got != origin {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, origin)
			}
			wantVaryOrigin(t, a)
			if got := a.header.Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("Access-Control-Allow-Credentials = %q, want none", got)
			}

			a = n.get(t, "/public/v1/key", "", "Origin", origin)
			wantError(t, a, 401, "unauthorized", "no API key")
			if got := a.header.Get("Access-Control-Allow-Origin"); got != origin {
				t.Errorf("on a 401: Access-Control-Allow-Origin = %q, want %q", got, origin)
			}
			wantVaryOrigin(t, a)

			a = n.get(t, "/public/v1/nope", secret, "Origin", origin)
			wantError(t, a, 404, "not_found", "route")
			if got := a.header.Get("Access-Control-Allow-Origin"); got != origin {
				t.Errorf("on a 404: Access-Control-Allow-Origin = %q, want %q", got, origin)
			}

			a = preflight(t, origin)
			wantBasics(t, a)
			if a.status != http.StatusNoContent {
				t.Fatalf("preflight status = %d, want 204; body %s", a.status, a.body)
			}
			if len(a.body) != 0 {
				t.Errorf("preflight body = %q, want none", a.body)
			}
			for h, want := range map[string]string{
				"Access-Control-Allow-Origin":  origin,
				"Access-Control-Allow-Methods": "GET",
				"Access-Control-Allow-Headers": "Authorization",
			} {
				if got := a.header.Get(h); got != want {
					t.Errorf("preflight %s = %q, want %q", h, got, want)
				}
			}
			if got := a.header.Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("preflight Access-Control-Allow-Credentials = %q, want none", got)
			}
			wantVaryOrigin(t, a)
			wantLimitHeaders(t, a, false)
		})
	}

	t.Run("other origin", func(t *testing.T) {
		a := n.get(t, "/public/v1/key", secret, "Origin", evilOrigin)
		wantOK(t, a)
		if got := corsHeaders(a); len(got) != 0 {
			t.Errorf("CORS headers %q, want none", got)
		}
		a = n.get(t, "/public/v1/key", "", "Origin", evilOrigin)
		wantError(t, a, 401, "unauthorized", "no API key")
		if got := corsHeaders(a); len(got) != 0 {
			t.Errorf("on a 401: CORS headers %q, want none", got)
		}
		a = preflight(t, evilOrigin)
		wantError(t, a, 400, "origin_not_allowed", evilOrigin)
		if got := corsHeaders(a); len(got) != 0 {
			t.Errorf("preflight: CORS headers %q, want none", got)
		}
	})

	t.Run("near misses are other origins", func(t *testing.T) {
		for _, origin := range []string{docsOrigin + "/", strings.ToUpper(appOrigin), "http://app.example.test", "null"} {
			a := preflight(t, origin)
			wantError(t, a, 400, "origin_not_allowed", "not allowed")
			if got := corsHeaders(a); len(got) != 0 {
				t.Errorf("%s: CORS headers %q, want none", origin, got)
			}
		}
	})

	t.Run("no origin", func(t *testing.T) {
		for _, a := range []answer{
			n.get(t, "/public/v1/key", secret),
			n.get(t, "/public/v1/key", ""),
		} {
			wantBasics(t, a)
			if got := corsHeaders(a); len(got) != 0 {
				t.Errorf("status %d: CORS headers %q, want none", a.status, got)
			}
		}
	})
}
