package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// These tests hold openapi.yaml to CONTRACT.md §2 and §3: every route, its
// scope, parameters with exact ranges, statuses, headers and error codes.

// route is what the contract says about one documented route.
type route struct {
	path     string
	scope    string // "" = no scope
	noAuth   bool   // no key at all (/openapi.json)
	data     bool   // ETag on 200, 304 on If-None-Match
	notFound bool   // 404 not_found applies
	params   []string
	success  string
}

var routes = []route{
	{path: "/public/v1/key", success: "200"},
	{path: "/public/v1/markets/search", scope: "markets:read", data: true, params: []string{"q", "limit", "min_confidence", "relation"}, success: "200"},
	{path: "/public/v1/events/{universal_id}", scope: "markets:read", data: true, notFound: true, params: []string{"universal_id"}, success: "200"},
	{path: "/public/v1/events", scope: "markets:read", data: true, params: []string{"limit", "cursor", "category", "venue", "min_venues", "min_confidence", "relation"}, success: "200"},
	{path: "/public/v1/prices/snapshot", scope: "markets:read", data: true, params: []string{"ids"}, success: "200"},
	{path: "/public/v1/markets/{universal_id}/trades", scope: "markets:read", data: true, notFound: true, params: []string{"universal_id", "limit"}, success: "200"},
	{path: "/public/v1/markets/{universal_id}/candles", scope: "markets:read", data: true, notFound: true, params: []string{"universal_id", "interval", "from", "to", "venue"}, success: "200"},
	{path: "/public/v1/account/keys", scope: "account:read", params: []string{"status", "limit", "cursor"}, success: "200"},
	{path: "/public/v1/account/usage", scope: "account:read", params: []string{"route", "from", "to", "limit", "cursor"}, success: "200"},
	{path: "/public/v1/stream", scope: "stream:read", success: "101"},
	{path: "/public/v1/openapi.json", noAuth: true, success: "200"},
}

// contractCodes is contract §2's error table: code → status.
var contractCodes = map[string]string{
	"unauthorized":       "401",
	"ip_not_allowed":     "403",
	"access_not_granted": "403",
	"insufficient_scope": "403",
	"not_found":          "404",
	"invalid_request":    "422",
	"rate_limited":       "429",
	"origin_not_allowed": "400",
	"unavailable":        "503",
}

// statuses is the exact set of statuses the contract implies for r.
func (r route) statuses() []string {
	s := []string{r.success}
	if r.data {
		s = append(s, "304")
	}
	if !r.noAuth {
		s = append(s, "401", "403", "429", "503")
	}
	if r.notFound {
		s = append(s, "404")
	}
	// 422 needs a query parameter (a malformed path id is 404), except that
	// the stream answers 422 to a request that is not a WebSocket handshake.
	if slices.ContainsFunc(r.params, func(p string) bool { return p != "universal_id" }) || r.path == "/public/v1/stream" {
		s = append(s, "422")
	}
	sort.Strings(s)
	return s
}

// doc is the parsed document plus helpers that follow $ref.
type doc struct {
	t    *testing.T
	root map[string]any
}

func load(t *testing.T) *doc {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(OpenAPIYAML, &root); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	return &doc{t: t, root: root}
}

// with returns d reporting to t (a subtest).
func (d *doc) with(t *testing.T) *doc { return &doc{t: t, root: d.root} }

// resolve follows $ref chains (local JSON pointers only).
func (d *doc) resolve(v any) map[string]any {
	d.t.Helper()
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			d.t.Fatalf("want an object, got %T (%v)", v, v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		v = d.pointer(ref)
	}
	d.t.Fatalf("$ref chain too long")
	return nil
}

// pointer looks up a local reference such as "#/components/schemas/Error".
func (d *doc) pointer(ref string) any {
	d.t.Helper()
	if !strings.HasPrefix(ref, "#/") {
		d.t.Fatalf("$ref %q is not local", ref)
	}
	var cur any = d.root
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			d.t.Fatalf("$ref %q: %q is not inside an object", ref, part)
		}
		if cur, ok = m[part]; !ok {
			d.t.Fatalf("$ref %q: no %q", ref, part)
		}
	}
	return cur
}

// get walks object keys, following $ref at each step.
func (d *doc) get(v any, keys ...string) any {
	d.t.Helper()
	for _, k := range keys {
		m := d.resolve(v)
		var ok bool
		if v, ok = m[k]; !ok {
			d.t.Fatalf("no key %q (have %v)", k, sortedKeys(m))
		}
	}
	return v
}

func (d *doc) operation(path string) map[string]any {
	d.t.Helper()
	return d.resolve(d.get(d.root, "paths", path, "get"))
}

// parameters maps an operation's parameters by name (header parameters excluded).
func (d *doc) parameters(op map[string]any) map[string]map[string]any {
	d.t.Helper()
	out := map[string]map[string]any{}
	list, _ := op["parameters"].([]any)
	for _, p := range list {
		pm := d.resolve(p)
		if pm["in"] == "header" {
			continue
		}
		out[pm["name"].(string)] = pm
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestOpenAPIHeader(t *testing.T) {
	d := load(t)
	checks := []struct {
		keys []string
		want any
	}{
		{[]string{"openapi"}, "3.1.0"},
		{[]string{"info", "title"}, "marketdata public API"},
		{[]string{"info", "version"}, "v1"},
		{[]string{"components", "securitySchemes", "bearer", "type"}, "http"},
		{[]string{"components", "securitySchemes", "bearer", "scheme"}, "bearer"},
	}
	for _, c := range checks {
		if got := d.get(d.root, c.keys...); got != c.want {
			t.Errorf("%s = %v, want %v", strings.Join(c.keys, "."), got, c.want)
		}
	}
	servers := d.root["servers"].([]any)
	srv := d.resolve(servers[0])
	if srv["url"] != "{base_url}" {
		t.Errorf("servers[0].url = %v, want {base_url}", srv["url"])
	}
	d.get(srv, "variables", "base_url", "default")
	bearerDesc := d.get(d.root, "components", "securitySchemes", "bearer", "description").(string)
	for _, want := range []string{"mdk_live_", "43", "[A-Za-z0-9_-]"} {
		if !strings.Contains(bearerDesc, want) {
			t.Errorf("bearer description does not mention %q", want)
		}
	}
}

func TestOpenAPIRoutes(t *testing.T) {
	d := load(t)
	documented := sortedKeys(d.root["paths"].(map[string]any))
	var want []string
	for _, r := range routes {
		want = append(want, r.path)
	}
	sort.Strings(want)
	if !slices.Equal(documented, want) {
		t.Errorf("paths = %v, want %v", documented, want)
	}
	ids := map[string]bool{}
	for _, r := range routes {
		t.Run(r.path, func(t *testing.T) {
			d := d.with(t)
			item := d.resolve(d.get(d.root, "paths", r.path))
			for k := range item {
				// x-availability: planned marks routes of later work (account
				// routes, streams) that the router does not serve yet.
				if k != "get" && k != "parameters" && k != "summary" && k != "description" && k != "x-availability" {
					t.Errorf("path item has %q; every route is GET only", k)
				}
			}
			op := d.operation(r.path)
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("operationId %q is empty or repeated", id)
			}
			ids[id] = true

			// Security and scope.
			scope, present := op["x-required-scope"]
			switch {
			case !present:
				t.Errorf("no x-required-scope")
			case r.scope == "" && scope != nil:
				t.Errorf("x-required-scope = %v, want null", scope)
			case r.scope != "" && scope != r.scope:
				t.Errorf("x-required-scope = %v, want %s", scope, r.scope)
			}
			sec, ok := op["security"].([]any)
			if !ok {
				t.Fatalf("no security on the operation")
			}
			wantSec := []any{map[string]any{"bearer": []any{}}}
			switch {
			case r.noAuth:
				wantSec = []any{}
			case r.scope != "":
				wantSec = []any{map[string]any{"bearer": []any{r.scope}}}
			}
			if !reflect.DeepEqual(sec, wantSec) {
				t.Errorf("security = %v, want %v", sec, wantSec)
			}
			if desc, _ := op["description"].(string); r.scope != "" && !strings.Contains(desc, r.scope) {
				t.Errorf("description does not name the scope %s", r.scope)
			}

			// Statuses.
			responses := d.resolve(op["responses"])
			got := sortedKeys(responses)
			if want := r.statuses(); !slices.Equal(got, want) {
				t.Errorf("statuses = %v, want %v", got, want)
			}
			for status, resp := range responses {
				d.checkResponse(t, r, status, d.resolve(resp))
			}

			// Parameters.
			params := d.parameters(op)
			if got, want := slices.Sorted(maps.Keys(params)), slices.Sorted(slices.Values(r.params)); !slices.Equal(got, want) {
				t.Errorf("parameters = %v, want %v", got, want)
			}
			hasINM := false
			list, _ := op["parameters"].([]any)
			for _, p := range list {
				if pm := d.resolve(p); pm["in"] == "header" && pm["name"] == "If-None-Match" {
					hasINM = true
				}
			}
			if hasINM != r.data {
				t.Errorf("If-None-Match parameter present = %v, want %v", hasINM, r.data)
			}
		})
	}
}

// checkResponse checks one response's headers and, for errors, its codes.
func (d *doc) checkResponse(t *testing.T, r route, status string, resp map[string]any) {
	t.Helper()
	headers := map[string]map[string]any{}
	if hs, ok := resp["headers"].(map[string]any); ok {
		for name, h := range hs {
			headers[name] = d.resolve(h)
		}
	}
	need := func(name string, required bool) {
		t.Helper()
		h, ok := headers[name]
		if !ok {
			t.Errorf("%s: no %s header", status, name)
			return
		}
		if got, _ := h["required"].(bool); got != required {
			t.Errorf("%s: %s required = %v, want %v", status, name, got, required)
		}
	}
	need("X-Request-Id", true)
	counted := !r.noAuth && (status == "200" || status == "304" || status == "404" || status == "422")
	for _, name := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		switch {
		case counted:
			need(name, true)
		case status == "429" || status == "503":
			need(name, false) // only when the window was reached
		default:
			if _, ok := headers[name]; ok {
				t.Errorf("%s: has %s, but this answer comes before the window check", status, name)
			}
		}
	}
	if r.data && (status == "200" || status == "304") {
		need("ETag", true)
	} else if _, ok := headers["ETag"]; ok {
		t.Errorf("%s: has ETag outside a data route's 200/304", status)
	}
	switch status {
	case "401":
		need("WWW-Authenticate", true)
		if got := d.get(headers["WWW-Authenticate"], "schema", "const"); got != `Bearer realm="public-api"` {
			t.Errorf("WWW-Authenticate = %v", got)
		}
	case "429", "503":
		need("Retry-After", true)
	}
	if status[0] != '4' && status[0] != '5' {
		return
	}
	for _, code := range d.responseCodes(t, resp) {
		if contractCodes[code] != status {
			t.Errorf("%s: code %s belongs to status %s", status, code, contractCodes[code])
		}
		if status == "403" && r.scope == "" && code == "insufficient_scope" {
			t.Errorf("403: insufficient_scope on a route that needs no scope")
		}
	}
	if status == "404" && r.path == "/public/v1/events/{universal_id}" {
		ex := d.get(resp, "content", "application/json", "examples", "merged", "value", "error").(map[string]any)
		if ex["merged_into"] == nil {
			t.Errorf("404 of the event read shows no merged_into example")
		}
	}
}

// responseCodes returns the error codes an error response narrows its body
// to (allOf: Error + code const/enum), checking the body is an Error.
func (d *doc) responseCodes(t *testing.T, resp map[string]any) []string {
	t.Helper()
	schema := d.resolve(d.get(resp, "content", "application/json", "schema"))
	all, ok := schema["allOf"].([]any)
	if !ok || len(all) != 2 || all[0].(map[string]any)["$ref"] != "#/components/schemas/Error" {
		t.Fatalf("error schema is not allOf [Error, code]: %v", schema)
	}
	code := d.get(all[1], "properties", "error", "properties", "code").(map[string]any)
	if c, ok := code["const"].(string); ok {
		return []string{c}
	}
	var out []string
	for _, c := range code["enum"].([]any) {
		out = append(out, c.(string))
	}
	if len(out) == 0 {
		t.Fatalf("error schema names no code")
	}
	return out
}

func TestOpenAPIErrorCodes(t *testing.T) {
	d := load(t)
	var got []string
	for _, c := range d.get(d.root, "components", "schemas", "ErrorCode", "enum").([]any) {
		got = append(got, c.(string))
	}
	want := slices.Sorted(maps.Keys(contractCodes))
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("ErrorCode enum = %v, want %v", got, want)
	}
	errObj := d.get(d.root, "components", "schemas", "Error", "properties", "error").(map[string]any)
	if req := fmt.Sprint(errObj["required"]); req != "[code message]" {
		t.Errorf("error.required = %s, want [code message]", req)
	}
	d.get(errObj, "properties", "merged_into")
	// Preflight refusals are documented once, as a shared response.
	resp := d.resolve(d.get(d.root, "components", "responses", "OriginNotAllowed"))
	if codes := d.responseCodes(t, resp); !slices.Equal(codes, []string{"origin_not_allowed"}) {
		t.Errorf("OriginNotAllowed codes = %v", codes)
	}
	desc := d.root["info"].(map[string]any)["description"].(string)
	for _, code := range want {
		if !strings.Contains(desc, "`"+code+"`") {
			t.Errorf("info.description's error table lacks %s", code)
		}
	}
}

// param is a parameter's expected schema constraints; nil fields are absent.
type param struct {
	path, name, in string
	required       bool
	typ            string
	min, max, def  any
	enum           []string
	maxLength      any
}

func TestOpenAPIParameters(t *testing.T) {
	d := load(t)
	const ev, tr = "/public/v1/events/{universal_id}", "/public/v1/markets/{universal_id}/trades"
	venues := []string{"venue_a", "venue_b", "venue_c", "venue_d"}
	tests := []param{
		{path: "/public/v1/markets/search", name: "q", in: "query", typ: "string", maxLength: 100, def: ""},
		{path: "/public/v1/markets/search", name: "limit", in: "query", typ: "integer", min: 1, max: 50, def: 20},
		{path: ev, name: "universal_id", in: "path", required: true, typ: "string", maxLength: 64},
		{path: "/public/v1/events", name: "limit", in: "query", typ: "integer", min: 1, max: 100, def: 50},
		{path: "/public/v1/events", name: "cursor", in: "query", typ: "string"},
		{path: "/public/v1/events", name: "category", in: "query", typ: "string"},
		{path: "/public/v1/events", name: "venue", in: "query", typ: "string", enum: venues},
		{path: "/public/v1/events", name: "min_venues", in: "query", typ: "integer", min: 1, max: 4},
		{path: "/public/v1/events", name: "min_confidence", in: "query", typ: "number", min: 0, max: 1},
		{path: "/public/v1/events", name: "relation", in: "query", typ: "string", enum: []string{"identity"}},
		{path: "/public/v1/markets/search", name: "min_confidence", in: "query", typ: "number", min: 0, max: 1},
		{path: "/public/v1/markets/search", name: "relation", in: "query", typ: "string", enum: []string{"identity"}},
		{path: "/public/v1/prices/snapshot", name: "ids", in: "query", required: true, typ: "array"},
		{path: tr, name: "universal_id", in: "path", required: true, typ: "string", maxLength: 64},
		{path: tr, name: "limit", in: "query", typ: "integer", min: 1, max: 200, def: 50},
		{path: "/public/v1/account/keys", name: "status", in: "query", typ: "string", enum: []string{"active", "revoked", "expired"}},
		{path: "/public/v1/account/keys", name: "limit", in: "query", typ: "integer", min: 1, max: 100, def: 50},
		{path: "/public/v1/account/keys", name: "cursor", in: "query", typ: "string"},
		{path: "/public/v1/account/usage", name: "route", in: "query", typ: "string",
			enum: []string{"key", "events", "event", "search", "snapshot", "trades", "candles", "account_keys", "account_usage", "stream"}},
		{path: "/public/v1/account/usage", name: "from", in: "query", typ: "string"},
		{path: "/public/v1/account/usage", name: "to", in: "query", typ: "string"},
		{path: "/public/v1/account/usage", name: "limit", in: "query", typ: "integer", min: 1, max: 100, def: 50},
		{path: "/public/v1/account/usage", name: "cursor", in: "query", typ: "string"},
	}
	for _, tc := range tests {
		t.Run(tc.path+"?"+tc.name, func(t *testing.T) {
			d := d.with(t)
			p, ok := d.parameters(d.operation(tc.path))[tc.name]
			if !ok {
				t.Fatalf("no parameter %s", tc.name)
			}
			if p["in"] != tc.in {
				t.Errorf("in = %v, want %s", p["in"], tc.in)
			}
			if got, _ := p["required"].(bool); got != tc.required {
				t.Errorf("required = %v, want %v", got, tc.required)
			}
			if desc, _ := p["description"].(string); desc == "" {
				t.Errorf("no description")
			}
			s := d.resolve(p["schema"])
			check := func(key string, want any) {
				t.Helper()
				got, present := s[key]
				if want == nil {
					if present {
						t.Errorf("%s = %v, want absent", key, got)
					}
					return
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", key, got, want)
				}
			}
			check("type", tc.typ)
			check("minimum", tc.min)
			check("maximum", tc.max)
			check("default", tc.def)
			check("maxLength", tc.maxLength)
			if tc.enum != nil {
				var want []any
				for _, e := range tc.enum {
					want = append(want, e)
				}
				check("enum", want)
			} else {
				check("enum", nil)
			}
		})
	}

	t.Run("ids", func(t *testing.T) {
		d := d.with(t)
		p := d.parameters(d.operation("/public/v1/prices/snapshot"))["ids"]
		if p["style"] != "form" || p["explode"] != false {
			t.Errorf("style/explode = %v/%v, want form/false (comma-separated)", p["style"], p["explode"])
		}
		s := d.resolve(p["schema"])
		if s["minItems"] != 1 || s["x-max-distinct-items"] != 50 {
			t.Errorf("minItems = %v, x-max-distinct-items = %v, want 1 and 50", s["minItems"], s["x-max-distinct-items"])
		}
		if pat := d.get(s, "items", "pattern"); pat != "^[A-Za-z0-9_-]{1,64}$" {
			t.Errorf("ids item pattern = %v", pat)
		}
	})
	t.Run("dates", func(t *testing.T) {
		d := d.with(t)
		for _, name := range []string{"from", "to"} {
			s := d.resolve(d.parameters(d.operation("/public/v1/account/usage"))[name]["schema"])
			if s["format"] != "date" || s["pattern"] != "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" {
				t.Errorf("%s: format %v pattern %v, want date YYYY-MM-DD", name, s["format"], s["pattern"])
			}
		}
	})
}

// keysAt returns the keys of the mapping at path in document order.
func keysAt(t *testing.T, path ...string) []string {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(OpenAPIYAML, &root); err != nil {
		t.Fatal(err)
	}
	n := root.Content[0]
next:
	for _, k := range path {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				n = n.Content[i+1]
				continue next
			}
		}
		t.Fatalf("no %q in %v", k, path)
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	return out
}

func TestOpenAPISchemas(t *testing.T) {
	d := load(t)
	fields := []struct {
		schema   string
		want     []string
		required []string // nil = all of want
	}{
		{"EventSummary", []string{"universal_id", "title", "category", "status", "venue_a_event_ticker", "venue_b_event_slug",
			"venue_c_event_id", "venue_d_event_id", "venue_count", "volume", "updated_at", "matches"}, nil},
		{"Market", []string{"universal_id", "event_id", "title", "status", "venues", "resolved_at", "result", "matches"},
			[]string{"universal_id", "event_id", "title", "status", "venues", "matches"}},
		{"Match", []string{"relation", "confidence", "method"}, nil},
		{"Quote", []string{"bid", "ask", "last", "volume_24h", "inverted"}, []string{"bid", "ask", "last", "volume_24h"}},
		{"Price", []string{"market_id", "event_id", "status", "quotes", "best_bid", "best_ask", "version", "updated_at"}, nil},
		{"Trade", []string{"trade_id", "market_id", "venue", "price", "size", "side", "ts", "inverted"},
			[]string{"trade_id", "market_id", "venue", "price", "size", "side", "ts"}},
		{"Candle", []string{"start", "trades", "volume", "trade", "bid", "ask"}, nil},
		{"OHLC", []string{"open", "high", "low", "close"}, nil},
		{"KeyInfo", []string{"key_id", "last4", "account_id", "scopes", "ip_allowlist", "created_at", "expires_at", "limit", "window_s"}, nil},
		{"KeyRecord", []string{"key_id", "account_id", "last4", "scopes", "ip_allowlist", "created_at", "expires_at", "revoked_at", "status"}, nil},
		{"UsageItem", []string{"date", "route", "count"}, nil},
	}
	for _, f := range fields {
		if got := keysAt(t, "components", "schemas", f.schema, "properties"); !slices.Equal(got, f.want) {
			t.Errorf("%s properties = %v, want %v", f.schema, got, f.want)
		}
		req := f.required
		if req == nil {
			req = f.want
		}
		if got := fmt.Sprint(d.get(d.root, "components", "schemas", f.schema, "required")); got != fmt.Sprint(req) {
			t.Errorf("%s required = %s, want %v", f.schema, got, req)
		}
	}

	nullable := []struct{ schema, field string }{
		{"EventSummary", "venue_a_event_ticker"}, {"EventSummary", "venue_b_event_slug"},
		{"EventSummary", "venue_c_event_id"}, {"EventSummary", "venue_d_event_id"},
		{"Quote", "bid"}, {"Quote", "ask"}, {"Quote", "last"},
		{"Price", "best_bid"}, {"Price", "best_ask"},
	}
	for _, n := range nullable {
		typ := fmt.Sprint(d.get(d.root, "components", "schemas", n.schema, "properties", n.field, "type"))
		if typ != "[string null]" && typ != "[number null]" {
			t.Errorf("%s.%s type = %s, want nullable", n.schema, n.field, typ)
		}
	}
	for _, c := range []struct {
		keys []string
		want any
	}{
		{[]string{"EventSummary", "properties", "volume", "type"}, "number"},
		{[]string{"EventSummary", "properties", "venue_count", "type"}, "integer"},
		{[]string{"Quote", "properties", "volume_24h", "type"}, "number"},
		{[]string{"Price", "properties", "version", "type"}, "integer"},
		{[]string{"Trade", "properties", "price", "type"}, "number"},
		{[]string{"Trade", "properties", "size", "type"}, "number"},
		{[]string{"Trade", "properties", "side", "enum"}, []any{"buy", "sell"}},
		{[]string{"Market", "properties", "result", "type"}, "string"},
		{[]string{"Match", "properties", "relation", "enum"}, []any{"identity", "complement", "subset", "superset", "overlap"}},
		{[]string{"Match", "properties", "method", "maxLength"}, 32},
		{[]string{"Quote", "properties", "inverted", "type"}, "boolean"},
		{[]string{"Trade", "properties", "inverted", "type"}, "boolean"},
		{[]string{"Timestamp", "format"}, "date-time"},
		{[]string{"Cursor", "type"}, []any{"string", "null"}},
	} {
		if got := d.get(d.root, append([]string{"components", "schemas"}, c.keys...)...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %v, want %v", strings.Join(c.keys, "."), got, c.want)
		}
	}
	if desc := d.get(d.root, "components", "schemas", "Timestamp", "description").(string); !strings.Contains(desc, "RFC 3339") || !strings.Contains(desc, "UTC") {
		t.Errorf("Timestamp description %q does not say RFC 3339 UTC", desc)
	}
	read := d.get(d.root, "components", "schemas", "EventRead", "allOf").([]any)
	if d.get(read[1], "properties", "recently_resolved", "maxItems") != 6 {
		t.Errorf("recently_resolved maxItems is not 6")
	}
	for schema, want := range map[string]string{
		"EventSummaryList": "[data]", "EventPage": "[data next_cursor]", "PriceSnapshot": "[data missing]",
		"TradeList": "[data]", "CandleList": "[data]", "KeyPage": "[data next_cursor]", "UsagePage": "[data next_cursor]",
	} {
		if got := fmt.Sprint(d.get(d.root, "components", "schemas", schema, "required")); got != want {
			t.Errorf("%s required = %s, want %s", schema, got, want)
		}
	}
	// Every time is a Timestamp (RFC 3339 UTC).
	for name, s := range d.root["components"].(map[string]any)["schemas"].(map[string]any) {
		props, _ := s.(map[string]any)["properties"].(map[string]any)
		for field, p := range props {
			if !strings.HasSuffix(field, "_at") && field != "ts" {
				continue
			}
			if !strings.Contains(fmt.Sprint(p), "#/components/schemas/Timestamp") {
				t.Errorf("%s.%s is not a Timestamp", name, field)
			}
		}
	}
}

func TestOpenAPIStream(t *testing.T) {
	d := load(t)
	desc := d.operation("/public/v1/stream")["description"].(string)
	for _, want := range []string{"4401", "4403", "4008", "1001", `"op":"subscribe"`, `"op":"unsubscribe"`,
		`"type":"subscribed"`, `"type":"unsubscribed"`, `"type":"price"`, `"type":"error"`, `"seq"`, `"missing"`,
		"ping", "429", "500"} {
		if !strings.Contains(desc, want) {
			t.Errorf("stream description lacks %s", want)
		}
	}
}

// secretPattern is a live key: a document must never show one, not even in an example.
var secretPattern = regexp.MustCompile(`mdk_live_[A-Za-z0-9_-]{43}`)

func TestOpenAPINoSecret(t *testing.T) {
	if m := secretPattern.Find(OpenAPIYAML); m != nil {
		t.Errorf("openapi.yaml contains a key: %s", m)
	}
	js, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if m := secretPattern.Find(js); m != nil {
		t.Errorf("openapi.json contains a key: %s", m)
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	d := load(t)
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				d.pointer(ref)
				n++
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(d.root)
	if n == 0 {
		t.Errorf("no $ref found")
	}
}

func TestOpenAPIJSON(t *testing.T) {
	js, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(js) {
		t.Fatal("OpenAPIJSON is not valid JSON")
	}
	var fromJSON any
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	// The YAML, decoded generically and re-encoded, must be the same value.
	var fromYAML any
	if err := yaml.Unmarshal(OpenAPIYAML, &fromYAML); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stringKeys(fromYAML))
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, want) {
		t.Error("OpenAPIJSON differs from openapi.yaml")
	}
	paths := fromJSON.(map[string]any)["paths"].(map[string]any)
	for _, r := range routes {
		if _, ok := paths[r.path].(map[string]any)["get"]; !ok {
			t.Errorf("JSON lacks GET %s", r.path)
		}
	}
	if got := sortedKeys(paths); len(got) != len(routes) {
		t.Errorf("JSON paths = %v, want %d", got, len(routes))
	}
	// Document order is kept: openapi, info, ... as written.
	if !bytes.HasPrefix(js, []byte(`{"openapi":"3.1.0","info":{"title":"marketdata public API"`)) {
		t.Errorf("JSON does not keep the document's key order: %.60s", js)
	}
	// The caller owns the slice.
	js[0] = 'X'
	if again, _ := OpenAPIJSON(); again[0] != '{' {
		t.Error("OpenAPIJSON returned shared memory")
	}
}

// stringKeys turns map[any]any (non-string YAML keys) into map[string]any.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = stringKeys(c)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			out[fmt.Sprint(k)] = stringKeys(c)
		}
		return out
	case []any:
		for i, c := range v {
			v[i] = stringKeys(c)
		}
	}
	return v
}

// TestYAMLToJSON covers the conversion's wrapping; internal/yamljson's
// tests cover the writer itself.
func TestYAMLToJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "non-string keys", in: "200: ok\ntrue: 1\n1.5: x\n", want: `{"200":"ok","true":1,"1.5":"x"}`},
		{name: "no HTML escaping", in: "a: <secret> & more\n", want: `{"a":"<secret> & more"}`},
		{name: "not YAML", in: "a: [\n", wantErr: true},
		{name: "duplicate key", in: "a: 1\na: 2\n", wantErr: true},
		{name: "infinity", in: "a: .inf\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yamlToJSON([]byte(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
