// Package prometheus holds marketdata's Prometheus alert rules (alerts.yml)
// and their promtool unit tests (alerts_test.yml); the Go tests here check
// the rules' shape, their runbook links and their test cases, run promtool,
// and check every metric the rules and the Grafana dashboard name against a
// running API node's and ingest worker's /metrics.
package prometheus

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/internal/testenv"
)

const (
	rulesFile     = "alerts.yml"
	ruleTestsFile = "alerts_test.yml"
	operationsDoc = "../../docs/operations.md"
	// runbookBase is where every runbook_url points: the operations guide
	// in the repository, one section per alert.
	runbookBase = "https://github.com/marketdata/marketdata/blob/main/docs/operations.md#"
)

// promql is the parser of the rules and the dashboard's queries, with
// Prometheus' default options.
var promql = parser.NewParser(parser.Options{})

// loadRules parses alerts.yml the way Prometheus loads it (unknown fields
// refused, every expression and annotation template checked).
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// alerts returns every alerting rule of groups.
func alerts(groups *rulefmt.RuleGroups) []rulefmt.Rule {
	var out []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestAlertRules: alerts.yml loads as Prometheus would load it, holds only
// alerts, and each has a for:, a severity, a summary, a description and a
// runbook_url into docs/operations.md; an alert name used by two rules
// (two severities) names the same runbook.
func TestAlertRules(t *testing.T) {
	groups := loadRules(t)
	all := alerts(groups)
	if len(all) == 0 {
		t.Fatal("alerts.yml has no alert")
	}
	runbooks := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: rule %q is not an alert: alerts.yml holds alerts only", g.Name, r.Record)
				continue
			}
			if r.For <= 0 {
				t.Errorf("%s: no for:, so one bad scrape fires it", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			url := r.Annotations["runbook_url"]
			if !strings.HasPrefix(url, runbookBase) {
				t.Errorf("%s: runbook_url %q, want it under %s", r.Alert, url, runbookBase)
			}
			if prev, ok := runbooks[r.Alert]; ok && prev != url {
				t.Errorf("%s: runbook_url %q and %q: one alert, one runbook", r.Alert, prev, url)
			}
			runbooks[r.Alert] = url
		}
	}
}

// TestAlertRunbooks: every runbook_url's anchor is a heading of
// docs/operations.md, and it is the alert's own section (its name, as
// GitHub makes the anchor of a heading).
func TestAlertRunbooks(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	for _, r := range alerts(loadRules(t)) {
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
		if !ok {
			continue // TestAlertRules reports it
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook anchor #%s is no heading of docs/operations.md", r.Alert, anchor)
		}
		if want := slug(r.Alert); anchor != want {
			t.Errorf("%s: runbook anchor #%s, want the alert's own section #%s", r.Alert, anchor, want)
		}
	}
}

var pageLink = regexp.MustCompile(`\]\(#([^)\s]+)\)`)

// TestOperationsLinks: every link of docs/operations.md to a section of
// itself (the alerts' sections link the runbook's) names a heading.
func TestOperationsLinks(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	for _, m := range pageLink.FindAllStringSubmatch(string(doc), -1) {
		if !anchors[m[1]] {
			t.Errorf("docs/operations.md links #%s, which is no heading of it", m[1])
		}
	}
}

func TestHeadingAnchors(t *testing.T) {
	doc := "# Operations: running\n\n## Health and metrics (`MD_ADMIN_ADDR`)\n\n```sh\n# not a heading\n```\n\n### MarketdataFreshnessHigh\n#no space\n"
	got := headingAnchors(doc)
	want := map[string]bool{"operations-running": true, "health-and-metrics-md_admin_addr": true, "marketdatafreshnesshigh": true}
	if len(got) != len(want) {
		t.Errorf("headingAnchors: got %v, want %v", got, want)
	}
	for a := range want {
		if !got[a] {
			t.Errorf("headingAnchors: %q missing from %v", a, got)
		}
	}
}

var notInSlug = regexp.MustCompile(`[^\p{L}\p{N}_ -]`)

// slug is the anchor GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces made hyphens.
func slug(heading string) string {
	return strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

// headingAnchors returns the anchors of the Markdown headings of doc,
// leaving out fenced code blocks.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for line := range strings.Lines(doc) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		anchors[slug(line[hashes:])] = true
	}
	return anchors
}

// ruleTests is the part of a promtool test file this package reads.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertCases: alerts_test.yml tests alerts.yml, and has for every alert
// a case where it fires and one where it does not.
func TestAlertCases(t *testing.T) {
	b, err := os.ReadFile(ruleTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rt.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s: rule_files %q, want [%s]", ruleTestsFile, rt.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
	}
	names := map[string]bool{}
	for _, r := range alerts(loadRules(t)) {
		names[r.Alert] = true
	}
	for name := range names {
		if fires[name] == 0 {
			t.Errorf("%s: no case in %s where it fires", name, ruleTestsFile)
		}
		if quiet[name] == 0 {
			t.Errorf("%s: no case in %s where it does not fire", name, ruleTestsFile)
		}
	}
	for name := range fires {
		if !names[name] {
			t.Errorf("%s tests alert %s, which alerts.yml does not have", ruleTestsFile, name)
		}
	}
}

// TestPromtool: `promtool check rules` accepts alerts.yml and `promtool test
// rules` passes alerts_test.yml: each alert fires on its cases and only on
// them, with the labels and annotations the cases expect.
func TestPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unavailable(t, "promtool (deploy/local/promtool.sh installs it from Debian's package prometheus)", err)
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", ruleTestsFile}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
		}
	}
}
