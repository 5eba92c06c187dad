package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
)

// TestWireShapes decodes every route's real answer into the client's types
// both ways: with unknown fields disallowed (the API sends nothing the
// types lack), and field by field (the types have nothing the API does not
// send, no null where the type cannot hold one, every time RFC 3339 in
// UTC). A field tagged omitempty may be absent, but must show up in one of
// the answers (the world has a resolved market for them).
func TestWireShapes(t *testing.T) {
	wd := newWorld(t)
	revoked := wd.s.CreateKey(wd.key.AccountID, "markets:read")
	wd.s.RevokeKey(revoked.KeyID)
	get := func(path string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, wd.s.URL()+"/public/v1"+path, nil)
		req.Header.Set("Authorization", "Bearer "+wd.key.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
		}
		return body
	}
	// Make a usage row exist before reading usage (visible within 5 s).
	wd.s.Await("usage counted", func() (bool, string) {
		var p struct {
			Data []client.UsageRow `json:"data"`
		}
		err := json.Unmarshal(get("/account/usage"), &p)
		return err == nil && len(p.Data) > 0, "no rows"
	})

	type (
		eventPage struct {
			Data       []client.Event `json:"data"`
			NextCursor *string        `json:"next_cursor"`
		}
		eventList struct {
			Data []client.Event `json:"data"`
		}
		tradeList struct {
			Data []client.Trade `json:"data"`
		}
		keyPage struct {
			Data       []client.AccountKey `json:"data"`
			NextCursor *string             `json:"next_cursor"`
		}
		usagePage struct {
			Data       []client.UsageRow `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
	)
	routes := []struct {
		path string
		into any
	}{
		{"/key", &client.Key{}},
		{"/events?limit=2", &eventPage{}},
		{"/events?limit=100", &eventPage{}}, // the last page: next_cursor null
		{"/events/w-e001", &client.EventDetail{}},
		{"/events/w-e006", &client.EventDetail{}},
		{"/markets/search?q=seeded", &eventList{}},
		{"/prices/snapshot?ids=w-e001-m1,nope,w-e006-m2", &client.Snapshot{}},
		{"/markets/w-e001-m1/trades", &tradeList{}},
		{"/events/w-e002", &client.EventDetail{}},
		{"/prices/snapshot?ids=w-e002-c1", &client.Snapshot{}},
		{"/markets/w-e002-c1/trades", &tradeList{}},
		{"/account/keys?limit=1", &keyPage{}},
		{"/account/keys", &keyPage{}},
		{"/account/usage?limit=1", &usagePage{}},
	}
	seen := map[string]bool{}
	optional := map[string]bool{}
	for _, r := range routes {
		body := get(r.path)
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(r.into); err != nil {
			t.Errorf("%s: strict decode into %T: %v\n%s", r.path, r.into, err, body)
			continue
		}
		var generic any
		if err := json.Unmarshal(body, &generic); err != nil {
			t.Fatal(err)
		}
		checkFields(t, r.path, reflect.TypeOf(r.into).Elem(), generic, seen, optional)
	}
	for name := range optional {
		if !seen[name] {
			t.Errorf("optional field %s: never sent by any answer of the test", name)
		}
	}
}

var timeType = reflect.TypeFor[time.Time]()

// checkFields checks that v (decoded JSON) has every field of typ.
func checkFields(t *testing.T, at string, typ reflect.Type, v any, seen, optional map[string]bool) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		if v != nil {
			checkFields(t, at, typ.Elem(), v, seen, optional)
		}
		return
	}
	if v == nil {
		t.Errorf("%s: null, but %v cannot hold null", at, typ)
		return
	}
	switch {
	case typ == timeType:
		s, ok := v.(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil || !strings.HasSuffix(s, "Z") || tm.Location() != time.UTC {
			t.Errorf("%s: %v is not an RFC 3339 time in UTC", at, v)
		}
	case typ.Kind() == reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %T, want an object for %v", at, v, typ)
			return
		}
		checkStruct(t, at, typ, obj, seen, optional)
	case typ.Kind() == reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %T, want an array", at, v)
			return
		}
		for _, x := range arr {
			checkFields(t, at+"[]", typ.Elem(), x, seen, optional)
		}
	case typ.Kind() == reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %T, want an object", at, v)
			return
		}
		for k, x := range obj {
			checkFields(t, at+"["+k+"]", typ.Elem(), x, seen, optional)
		}
	}
}

func checkStruct(t *testing.T, at string, typ reflect.Type, obj map[string]any, seen, optional map[string]bool) {
	t.Helper()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			checkStruct(t, at, f.Type, obj, seen, optional)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Errorf("%v.%s: no JSON name", typ, f.Name)
			continue
		}
		key := typ.String() + "." + name
		if strings.Contains(opts, "omitempty") {
			optional[key] = true
		}
		x, ok := obj[name]
		if !ok {
			if !optional[key] && !seen["missing "+at+key] {
				seen["missing "+at+key] = true // reported once per route, not per item
				t.Errorf("%s: field %q of %v is not in the answer", at, name, typ)
			}
			continue
		}
		seen[key] = true
		checkFields(t, at+"."+name, f.Type, x, seen, optional)
	}
}
