package yamljson

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return &n
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        string // a part of the error's text
	}{
		{name: "non-string keys", in: "200: ok\ntrue: 1\n1.5: x\n", want: `{"200":"ok","true":1,"1.5":"x"}`},
		{name: "order kept", in: "b: 1\na: [x, 2, null, true, 1.5]\n", want: `{"b":1,"a":["x",2,null,true,1.5]}`},
		{name: "aliases", in: "a: &x {k: v}\nb: *x\n", want: `{"a":{"k":"v"},"b":{"k":"v"}}`},
		{name: "no HTML escaping", in: "a: <secret> & more\n", want: `{"a":"<secret> & more"}`},
		{name: "quoted scalars stay strings", in: "a: '1'\nb: 'null'\n", want: `{"a":"1","b":"null"}`},
		{name: "empty containers", in: "a: {}\nb: []\n", want: `{"a":{},"b":[]}`},
		{name: "top-level sequence", in: "- 1\n- [2, {c: d}]\n", want: `[1,[2,{"c":"d"}]]`},
		{name: "duplicate key", in: "a: 1\na: 2\n", wantErr: `$: duplicate key "a" on line 2`},
		{name: "infinity", in: "a:\n  - .inf\n", wantErr: "$.a[0]: line 2:"},
		{name: "merge key", in: "a: &x {k: v}\nb:\n  <<: *x\n", wantErr: "$.b: merge key on line 3"},
		{name: "non-scalar key", in: "? [a]\n: 1\n", wantErr: "$: mapping key on line 1 is not a scalar"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(parse(t, tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %s, %v; want an error with %q", got, err, tc.wantErr)
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

func TestMarshalIndent(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "scalar", in: "x\n", want: `"x"`},
		{name: "empty containers stay on one line", in: "a: {}\nb: []\n", want: "{\n  \"a\": {},\n  \"b\": []\n}"},
		{
			name: "nested, order kept",
			in:   "z: 1\na:\n  - k: <v>\n    j: null\n  - 2\n",
			want: "{\n  \"z\": 1,\n  \"a\": [\n    {\n      \"k\": \"<v>\",\n      \"j\": null\n    },\n    2\n  ]\n}",
		},
		{name: "keys not HTML-escaped", in: "<k>: 1\n", want: "{\n  \"<k>\": 1\n}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalIndent(parse(t, tc.in), "  ")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	// An empty indent is Marshal's compact form.
	n := parse(t, "a: [1, {b: 2}]\n")
	compact, err := Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := MarshalIndent(n, ""); err != nil || string(got) != string(compact) {
		t.Errorf("MarshalIndent(n, \"\") = %s, %v; want %s", got, err, compact)
	}
}

func TestMarshalRefuses(t *testing.T) {
	var empty yaml.Node // Kind 0: no node a document can hold
	if got, err := Marshal(&empty); err == nil {
		t.Errorf("got %s for a zero node, want an error", got)
	}
	twoDocs := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "a"}, {Kind: yaml.ScalarNode, Value: "b"}}}
	if got, err := Marshal(twoDocs); err == nil || !strings.Contains(err.Error(), "want one document") {
		t.Errorf("got %s, %v for a document of two nodes, want an error", got, err)
	}
}
