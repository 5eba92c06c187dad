package k8s

import (
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The examples docs/kubernetes.md gives are checked against the rendered
// manifests, so that an operator who copies one gets what the text says.

const kubernetesDoc = "../../docs/kubernetes.md"

// docBlocks returns the ```yaml blocks of docs/kubernetes.md that contain
// marker, without the indentation of a block inside a list item.
func docBlocks(t *testing.T, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(kubernetesDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, part := range strings.Split(string(b), "```yaml\n")[1:] {
		part, _, _ = strings.Cut(part, "```")
		if strings.Contains(part, marker) {
			out = append(out, dedent(part))
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/kubernetes.md: no yaml block with %q", marker)
	}
	return out
}

// dedent removes the indentation all of block's lines share.
func dedent(block string) string {
	lines := strings.Split(block, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	if indent <= 0 {
		return block
	}
	for i, l := range lines {
		lines[i] = l[min(indent, len(l)-len(strings.TrimLeft(l, " "))):]
	}
	return strings.Join(lines, "\n")
}

// withDocPatches renders the prod overlay with the kustomization patches
// of the docs' block that contains marker added to its own, as the docs
// tell an operator to.
func withDocPatches(t *testing.T, marker string) *rendered {
	t.Helper()
	return withDocEntries(t, marker, "patches", nil)
}

// withDocEntries renders the prod overlay with the entries of the
// kustomization list field (patches, configMapGenerator) that the docs'
// block containing marker gives added to its own, and with files (names
// relative to the overlay) written beside it.
func withDocEntries(t *testing.T, marker, field string, files map[string]string) *rendered {
	t.Helper()
	block := docBlocks(t, marker)[0]
	var doc map[string][]any
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil || len(doc[field]) == 0 {
		t.Fatalf("docs/kubernetes.md: the block with %q is not a kustomization's %s (%v):\n%s", marker, field, err, block)
	}
	mem := copyToMemory(t, ".")
	const overlay = "/k8s/overlays/prod"
	path := overlay + "/kustomization.yaml"
	kb, err := mem.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(kb, &k); err != nil {
		t.Fatal(err)
	}
	entries, _ := k[field].([]any)
	k[field] = append(entries, doc[field]...)
	out, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile(path, out); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := mem.WriteFile(overlay+"/"+name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	return render(t, mem, overlay)
}

// TestOverlayEnvInDocs: the generator entry docs/kubernetes.md gives for
// setting a shared variable (MD_NATS_URL) in an overlay's own
// marketdata.env merges it into the ConfigMap both Deployments read, keeps
// the base's other values, and rolls both.
func TestOverlayEnvInDocs(t *testing.T) {
	const url = "nats://nats-0.nats:4222,nats://nats-1.nats:4222"
	before := render(t, filesys.MakeFsOnDisk(), "overlays/prod")
	after := withDocEntries(t, "name: marketdata-env", "configMapGenerator",
		map[string]string{"marketdata.env": "MD_NATS_URL=" + url + "\n"})
	for _, name := range []string{"api", "ingest"} {
		env := after.containerEnv(t, after.deployments[name].Spec.Template.Spec.Containers[0])
		if got := env["MD_NATS_URL"].value; got != url {
			t.Errorf("%s: MD_NATS_URL %q after the docs' change, want the overlay's %q", name, got, url)
		}
		if _, ok := env["MD_ADMIN_ADDR"]; !ok {
			t.Errorf("%s: MD_ADMIN_ADDR gone after the docs' change: the overlay's file must merge, not replace", name)
		}
		if reflect.DeepEqual(before.deployments[name].Spec.Template, after.deployments[name].Spec.Template) {
			t.Errorf("%s: pod template unchanged: the pods would not roll", name)
		}
	}
}

// TestIngestReplicasPatchInDocs: the overlay patch docs/kubernetes.md
// gives for more ingest workers sets the count the docs name and changes
// nothing else.
func TestIngestReplicasPatchInDocs(t *testing.T) {
	const want = 3 // the docs' example
	before := render(t, filesys.MakeFsOnDisk(), "overlays/prod")
	after := withDocPatches(t, "/spec/replicas")
	got := after.deployments["ingest"]
	if got == nil {
		t.Fatal("no Deployment ingest after the docs' patch")
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != want {
		t.Fatalf("ingest after the docs' patch: replicas %s, want %d", ptrString(got.Spec.Replicas), want)
	}
	patched := *got
	patched.Spec.Replicas = before.deployments["ingest"].Spec.Replicas
	if !reflect.DeepEqual(&patched, before.deployments["ingest"]) {
		t.Errorf("the docs' patch changes more of ingest than its replicas")
	}
	if !reflect.DeepEqual(after.deployments["api"], before.deployments["api"]) {
		t.Errorf("the docs' patch changes the api Deployment")
	}
}

// podMonitor is the part of a Prometheus Operator PodMonitor the docs
// use; decoding refuses any other field, so a misspelled one fails.
type podMonitor struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		JobLabel string `yaml:"jobLabel"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		PodMetricsEndpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
	} `yaml:"spec"`
}

// relabelRule is one of Prometheus' relabel_configs, as far as the docs
// use it (action replace, the default).
type relabelRule struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    *string  `yaml:"separator"`
	Regex        string   `yaml:"regex"`
	TargetLabel  string   `yaml:"target_label"`
	Replacement  string   `yaml:"replacement"`
}

// TestScrapeJobsInDocs: the scrape setups docs/kubernetes.md gives put the
// API nodes and the ingest workers in two jobs, as the alerts' "by (job)"
// and docs/operations.md ("Dashboards and alerts") need, under the same
// job names either way: the PodMonitors' default, <namespace>/<name>, and
// the relabel rule's for the kubernetes-pods job.
func TestScrapeJobsInDocs(t *testing.T) {
	r := render(t, filesys.MakeFsOnDisk(), "overlays/prod")
	routes := adminRoutes(t)
	namespace := r.deployments["api"].Namespace

	jobs := map[string]string{} // Deployment → job, from the PodMonitors
	dec := yaml.NewDecoder(strings.NewReader(docBlocks(t, "kind: PodMonitor")[0]))
	dec.KnownFields(true)
	for {
		var pm podMonitor
		err := dec.Decode(&pm)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("docs/kubernetes.md: PodMonitor block: %v", err)
		}
		if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" {
			t.Fatalf("docs/kubernetes.md: %s %s in the PodMonitor block", pm.APIVersion, pm.Kind)
		}
		name := pm.Metadata.Name
		if pm.Metadata.Namespace != namespace {
			t.Errorf("PodMonitor %s in namespace %q: it finds pods in its own namespace, the prod overlay's is %q", name, pm.Metadata.Namespace, namespace)
		}
		if pm.Spec.JobLabel != "" {
			t.Errorf("PodMonitor %s: jobLabel %q; the docs name the default job, <namespace>/<name>", name, pm.Spec.JobLabel)
		}
		targets := r.selected(labels.SelectorFromSet(pm.Spec.Selector.MatchLabels))
		if len(targets) != 1 {
			t.Errorf("PodMonitor %s selects the pods of %v, want one Deployment's", name, targets)
			continue
		}
		c := r.deployments[targets[0]].Spec.Template.Spec.Containers[0]
		if len(pm.Spec.PodMetricsEndpoints) != 1 {
			t.Errorf("PodMonitor %s: %d endpoints, want the admin port's /metrics", name, len(pm.Spec.PodMetricsEndpoints))
			continue
		}
		ep := pm.Spec.PodMetricsEndpoints[0]
		hasPort := false
		for _, p := range c.Ports {
			hasPort = hasPort || p.Name == ep.Port
		}
		if !hasPort || ep.Port != "admin" || !routes[ep.Path] || ep.Path != "/metrics" {
			t.Errorf("PodMonitor %s: port %q path %q, want %s's admin port and /metrics", name, ep.Port, ep.Path, targets[0])
		}
		jobs[targets[0]] = pm.Metadata.Namespace + "/" + name
	}
	if len(jobs) != 2 || jobs["api"] == "" || jobs["ingest"] == "" || jobs["api"] == jobs["ingest"] {
		t.Fatalf("PodMonitors' jobs %v, want one each for api and ingest", jobs)
	}

	var rules []relabelRule
	dec = yaml.NewDecoder(strings.NewReader(docBlocks(t, "target_label: job")[0]))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("docs/kubernetes.md: the relabel block is not a list of relabel_configs: %v", err)
	}
	for name, pod := range r.pods() {
		meta := map[string]string{"__meta_kubernetes_namespace": namespace}
		for k, v := range pod.Labels {
			meta["__meta_kubernetes_pod_label_"+promLabelName(k)] = v
		}
		job, set := relabelJob(t, rules, meta)
		want, scraped := "", false
		if dep, ok := strings.CutPrefix(name, "Deployment/"); ok {
			want, scraped = jobs[dep]
		}
		if set != scraped || job != want {
			t.Errorf("%s: the relabel rule gives job %q (set %v), the PodMonitors %q", name, job, set, want)
		}
	}
}

// promLabelName is the name Kubernetes service discovery gives a pod
// label: every character outside [a-zA-Z0-9_] becomes _.
func promLabelName(k string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(k, "_")
}

// relabelJob applies rules that target the job label to a target's
// labels, as Prometheus does: the source values joined by the separator,
// the regex anchored at both ends, the replacement expanded on a match.
func relabelJob(t *testing.T, rules []relabelRule, meta map[string]string) (string, bool) {
	t.Helper()
	job, set := "", false
	for _, rule := range rules {
		if rule.TargetLabel != "job" {
			continue
		}
		sep := ";"
		if rule.Separator != nil {
			sep = *rule.Separator
		}
		var vals []string
		for _, l := range rule.SourceLabels {
			v, known := meta[l]
			if !known && !strings.HasPrefix(l, "__meta_kubernetes_pod_label_") {
				t.Fatalf("relabel rule reads %s, which this test does not know", l)
			}
			vals = append(vals, v)
		}
		re, err := regexp.Compile("^(?:" + rule.Regex + ")$")
		if err != nil {
			t.Fatalf("relabel regex %q: %v", rule.Regex, err)
		}
		src := strings.Join(vals, sep)
		m := re.FindStringSubmatchIndex(src)
		if m == nil {
			continue
		}
		job, set = string(re.ExpandString(nil, rule.Replacement, src, m)), true
	}
	return job, set
}
