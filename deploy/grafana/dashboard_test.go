package grafana

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// decode is JSON decoded into maps and slices, so that two encodings of one
// dashboard compare equal whatever their spacing and key order.
func decode(t *testing.T, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// firstDiff is the JSON path of the first place a and b differ ("" when
// they are equal), with both values there.
func firstDiff(path string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if d := firstDiff(path+"."+k, av[k], bv[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := range min(len(av), len(bv)) {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i]); d != "" {
				return d
			}
		}
		if len(av) != len(bv) {
			return fmt.Sprintf("%s: %d elements, want %d", path, len(av), len(bv))
		}
		return ""
	}
	if reflect.DeepEqual(a, b) {
		return ""
	}
	return fmt.Sprintf("%s: %v, want %v", path, a, b)
}

func TestFirstDiff(t *testing.T) {
	cases := []struct {
		a, b, want string
	}{
		{`{"a":[1,{"b":2}]}`, `{"a":[1,{"b":2}]}`, ""},
		{`{"a":[1,{"b":2}]}`, `{"a":[1,{"b":3}]}`, "$.a[1].b: 2, want 3"},
		{`{"a":1}`, `{"a":1,"c":true}`, "$.c: <nil>, want true"},
		{`{"a":[1]}`, `{"a":[1,2]}`, "$.a: 1 elements, want 2"},
		{`{"a":"x"}`, `{"a":{"x":1}}`, "$.a: x, want map[x:1]"},
	}
	for _, c := range cases {
		got := firstDiff("$", decode(t, "a", []byte(c.a)), decode(t, "b", []byte(c.b)))
		if got != c.want {
			t.Errorf("firstDiff(%s, %s) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestDashboardUpToDate: the committed marketdata.json is the dashboard this
// package builds.
func TestDashboardUpToDate(t *testing.T) {
	built, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(File)
	if err != nil {
		t.Fatalf("%v: run `%s` to write it", err, Regenerate)
	}
	if d := firstDiff("$", decode(t, File, committed), decode(t, "the built dashboard", built)); d != "" {
		t.Errorf("deploy/grafana/%s is not the dashboard the code builds (first difference, committed vs built: %s): run `%s` and commit the file", File, d, Regenerate)
	}
}

// dashboardDoc is the part of the dashboard JSON the structure test reads.
type dashboardDoc struct {
	UID    string `json:"uid"`
	Panels []struct {
		ID         int               `json:"id"`
		Type       string            `json:"type"`
		Title      string            `json:"title"`
		Datasource map[string]string `json:"datasource"`
		Targets    []struct {
			RefID      string            `json:"refId"`
			Expr       string            `json:"expr"`
			Datasource map[string]string `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string            `json:"name"`
			Type       string            `json:"type"`
			Query      any               `json:"query"`
			Datasource map[string]string `json:"datasource"`
			Multi      bool              `json:"multi"`
			IncludeAll bool              `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardStructure: a Prometheus datasource variable that every panel
// and query uses, job and instance variables (several or all), unique
// panel ids and titles, and a query in every panel.
func TestDashboardStructure(t *testing.T) {
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != UID {
		t.Errorf("uid %q, want %q", d.UID, UID)
	}
	wantDS := map[string]string{"type": "prometheus", "uid": "${datasource}"}
	var names []string
	for _, v := range d.Templating.List {
		names = append(names, v.Name)
		switch v.Name {
		case "datasource":
			if v.Type != "datasource" || v.Query != "prometheus" {
				t.Errorf("variable datasource: type %q query %v, want a datasource variable of Prometheus data sources", v.Type, v.Query)
			}
		case "job", "instance":
			if v.Type != "query" || !reflect.DeepEqual(v.Datasource, wantDS) || !v.Multi || !v.IncludeAll {
				t.Errorf("variable %s: type %q datasource %v multi %v includeAll %v, want a query of ${datasource} taking several values or all", v.Name, v.Type, v.Datasource, v.Multi, v.IncludeAll)
			}
		}
	}
	if !slices.Equal(names, []string{"datasource", "job", "instance"}) {
		t.Errorf("variables %q, want [datasource job instance]", names)
	}
	ids, titles := map[int]bool{}, map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if titles[p.Title] {
			t.Errorf("two panels titled %q", p.Title)
		}
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		if !reflect.DeepEqual(p.Datasource, wantDS) {
			t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || !reflect.DeepEqual(q.Datasource, wantDS) {
				t.Errorf("panel %q: query %+v, want an expr, a refId and datasource %v", p.Title, q, wantDS)
			}
		}
	}
}

// TestDashboardDecodes: the committed file decodes strictly into the SDK's
// dashboard type (no field Grafana's schema lacks, every panel and query of
// a known plugin) and passes its validation.
func TestDashboardDecodes(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	b, err := os.ReadFile(File)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(b); failed(err) {
		t.Fatalf("%s: %v", File, err)
	}
	if err := d.Validate(); failed(err) {
		t.Errorf("%s: %v", File, err)
	}
}

// failed reports whether err is an error: the SDK returns an empty
// cog.BuildErrors, a non-nil error interface, when all is well.
func failed(err error) bool {
	var be cog.BuildErrors
	if errors.As(err, &be) {
		return len(be) > 0
	}
	return err != nil
}
