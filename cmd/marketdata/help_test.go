package main

import (
	"slices"
	"strings"
	"testing"
)

// TestHelpListsTheEnvironment: --help of api, ingest and dev lists every
// variable each reads, with its default, from the table LoadConfig reads;
// never a value from the environment.
func TestHelpListsTheEnvironment(t *testing.T) {
	// The table is what LoadConfig reads, no more and no less.
	read := map[string]bool{}
	for _, mode := range []secretsMode{secretsUnused, secretsRequired, secretsPepper} {
		LoadConfig(func(name string) string { //nolint:errcheck // only the names asked matter
			read[name] = true
			return ""
		}, mode)
	}
	for _, v := range envTable() {
		if !read[v.name] {
			t.Errorf("%s is in the table but LoadConfig never reads it", v.name)
		}
		delete(read, v.name)
	}
	for name := range read {
		t.Errorf("LoadConfig reads %s, which the table (and --help) lacks", name)
	}

	const pepper = "help-must-not-show-this-pepper-0123456789"
	for _, c := range []struct {
		cmd     string
		readers readers
	}{{"api", forAPI}, {"ingest", forIngest}, {"dev", forAPI | forIngest | forFeed | forDocs}} {
		out, err := run(t, map[string]string{"MD_KEY_PEPPER": pepper, "MD_HTTP_ADDR": "127.0.0.1:7777"}, c.cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, pepper) || strings.Contains(out, "7777") {
			t.Errorf("%s --help shows a value from the environment", c.cmd)
		}
		for _, v := range envTable() {
			listed := slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
				return strings.HasPrefix(line, "  "+v.name+" ") && strings.Contains(line, "("+v.shown())
			})
			if want := v.readers&c.readers != 0; listed != want {
				t.Errorf("%s --help: %s with its default listed %v, want %v", c.cmd, v.name, listed, want)
			}
		}
	}
	out, _ := run(t, nil, "dev", "--help")
	for _, s := range []string{"MD_AUTHFAIL_LIMIT", "in dev: not applied to loopback clients", "in dev: follows MD_DOCS_ADDR"} {
		if !strings.Contains(out, s) {
			t.Errorf("dev --help does not say %q", s)
		}
	}
}
