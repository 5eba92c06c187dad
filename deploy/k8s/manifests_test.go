package k8s

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// expectations are what each kustomization promises beyond what all share.
var expectations = map[string]struct {
	apiReplicas   int32 // the fixed count without an autoscaler; 0: the autoscaler owns it
	hpaMin        int32 // the autoscaler's floor
	spread        bool  // api and ingest spread over machines
	trustsProxies bool  // MD_TRUSTED_PROXIES names the ingress controller (or its placeholder)
}{
	"base":          {hpaMin: 2},
	"overlays/dev":  {apiReplicas: 1},
	"overlays/prod": {hpaMin: 3, spread: true, trustsProxies: true},
}

// minIngestReplicas is the least workers' count of every kustomization: a
// worker restarting or drained leaves another consuming. An overlay may run
// more (docs/kubernetes.md, "Scaling").
const minIngestReplicas = 2

func TestRender(t *testing.T) {
	for _, r := range renderAll(t) {
		if _, ok := expectations[filepath.ToSlash(r.dir)]; !ok {
			t.Errorf("%s: no expectations for this kustomization: add it to expectations", r.dir)
		}
		for _, name := range []string{"api", "ingest"} {
			if r.deployments[name] == nil {
				t.Errorf("%s: no Deployment %q (rendered: %s)", r.dir, name, strings.Join(r.objects, ", "))
			}
		}
		t.Logf("%s: %s", r.dir, strings.Join(r.objects, ", "))
	}
}

// effective is the value a variable takes in a container: the manifests'
// literal, else the binary's default.
func effective(t *testing.T, dir string, env map[string]envSource, vars map[string]binaryVar, name string) string {
	t.Helper()
	if e, ok := env[name]; ok {
		if !e.literal {
			t.Fatalf("%s: %s comes from a Secret: an address must be visible to the probes", dir, name)
		}
		return e.value
	}
	if vars[name].def == "" {
		t.Fatalf("%s: %s is unset and envTable has no literal default for it", dir, name)
	}
	return vars[name].def
}

// namedPort resolves a probe's or Service's port against a container's.
func namedPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, true
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// TestPortsAndProbes: every container listens where its ports, probes and
// scrape annotations say, on the binary's addresses (MD_HTTP_ADDR and
// MD_ADMIN_ADDR as the manifests set them, else envTable's defaults), and
// probes only routes the admin server serves.
func TestPortsAndProbes(t *testing.T) {
	vars, routes, exposed := binaryEnv(t), adminRoutes(t), dockerExposed(t)
	addrVars := map[string]map[string]string{ // command → port name → variable
		"api":    {"http": "MD_HTTP_ADDR", "admin": "MD_ADMIN_ADDR"},
		"ingest": {"admin": "MD_ADMIN_ADDR"},
	}
	for _, r := range renderAll(t) {
		for name, d := range r.deployments {
			spec := d.Spec.Template.Spec
			if len(spec.Containers) != 1 {
				t.Fatalf("%s: %s: %d containers, want 1", r.dir, name, len(spec.Containers))
			}
			c := spec.Containers[0]
			cmd := command(t, r.dir, c)
			env := r.containerEnv(t, c)
			want := map[string]int32{}
			for portName, v := range addrVars[cmd] {
				host, port := listenAddr(t, v, effective(t, r.dir, env, vars, v))
				if host != "" && host != "0.0.0.0" && host != "::" {
					t.Errorf("%s: %s: %s listens on %q: the kubelet and the Service reach the pod's address, not its loopback", r.dir, name, v, host)
				}
				if _, def := listenAddr(t, v, vars[v].def); port != def {
					t.Errorf("%s: %s: %s port %d, the binary's default is %d (the port deploy/Dockerfile exposes and docs name)", r.dir, name, v, port, def)
				}
				if !exposed[port] {
					t.Errorf("%s: %s: port %d (%s) is not in deploy/Dockerfile's EXPOSE", r.dir, name, port, v)
				}
				want[portName] = port
			}
			if len(want) == 0 {
				t.Fatalf("%s: %s runs %q: no addresses known for it", r.dir, name, cmd)
			}
			got := map[string]int32{}
			for _, p := range c.Ports {
				got[p.Name] = p.ContainerPort
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s: container ports %v, want %v", r.dir, name, got, want)
			}

			probes := []struct {
				kind  string
				probe *corev1.Probe
				path  string // "" when any admin route will do
			}{
				{"startupProbe", c.StartupProbe, ""},
				{"readinessProbe", c.ReadinessProbe, "/readyz"},
				{"livenessProbe", c.LivenessProbe, "/healthz"},
			}
			for _, p := range probes {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: %s: no HTTP %s", r.dir, name, p.kind)
					continue
				}
				get := p.probe.HTTPGet
				if !routes[get.Path] || (p.path != "" && get.Path != p.path) {
					t.Errorf("%s: %s: %s on %q; want %s, of the admin routes %s", r.dir, name, p.kind, get.Path, cmpOr(p.path, "one"), sortedKeys(routes))
				}
				if port, ok := namedPort(c, get.Port); !ok || port != want["admin"] {
					t.Errorf("%s: %s: %s on port %s (%d), want the admin port %d", r.dir, name, p.kind, get.Port.String(), port, want["admin"])
				}
			}
			ann := d.Spec.Template.Annotations
			if ann["prometheus.io/port"] != strconv.Itoa(int(want["admin"])) || !routes[ann["prometheus.io/path"]] {
				t.Errorf("%s: %s: scrape annotations port %q path %q, want the admin port %d and a route of %s",
					r.dir, name, ann["prometheus.io/port"], ann["prometheus.io/path"], want["admin"], sortedKeys(routes))
			}
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestServices: a Service selects one Deployment's pods and sends to a
// port its container has; only the public API port is exposed (the admin
// port serves /debug/pprof).
func TestServices(t *testing.T) {
	for _, r := range renderAll(t) {
		if r.services["api"] == nil {
			t.Errorf("%s: no Service api", r.dir)
		}
		for name, s := range r.services {
			targets := r.selected(labels.SelectorFromSet(s.Spec.Selector))
			if len(targets) != 1 {
				t.Errorf("%s: Service %s selects the pods of %v, want one Deployment", r.dir, name, targets)
				continue
			}
			c := r.deployments[targets[0]].Spec.Template.Spec.Containers[0]
			for _, p := range s.Spec.Ports {
				port, ok := namedPort(c, p.TargetPort)
				if !ok {
					t.Errorf("%s: Service %s: targetPort %s is no port of %s", r.dir, name, p.TargetPort.String(), targets[0])
					continue
				}
				for _, cp := range c.Ports {
					if cp.ContainerPort == port && cp.Name != "http" {
						t.Errorf("%s: Service %s exposes %s's %s port %d", r.dir, name, targets[0], cp.Name, port)
					}
				}
			}
		}
	}
}

// selected lists the Deployments whose pods sel matches.
func (r *rendered) selected(sel labels.Selector) []string {
	var out []string
	for name, d := range r.deployments {
		if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, name)
		}
	}
	return out
}

// TestEnvIsReadByTheBinary: every variable a container is given is one its
// command reads (envTable's readers), so a misspelled or moved variable,
// silently ignored by the binary, fails here.
func TestEnvIsReadByTheBinary(t *testing.T) {
	vars := binaryEnv(t)
	for _, r := range renderAll(t) {
		for name, pod := range r.pods() {
			for _, c := range allContainers(pod.Spec) {
				cmd := command(t, r.dir, c)
				for v := range r.containerEnv(t, c) {
					var ok bool
					switch cmd {
					case "migrate":
						ok = migrateReads[v]
					default:
						reader, known := readerOf[cmd]
						if !known {
							t.Fatalf("%s: %s: container %s runs %q: which variables does it read?", r.dir, name, c.Name, cmd)
						}
						ok = vars[v].readers[reader] || goRuntimeVars[v]
					}
					if !ok {
						t.Errorf("%s: %s: container %s (marketdata %s) is given %s, which it does not read", r.dir, name, c.Name, cmd, v)
					}
				}
			}
		}
	}
}

// secretVars are the variables that hold or may hold credentials: the
// keys with no default that the API requires (envTable), and the URLs whose
// user info may carry a password (docs/configuration.md).
func secretVars(vars map[string]binaryVar) map[string]bool {
	out := map[string]bool{"MD_DATABASE_URL": true, "MD_DATABASE_READ_URL": true, "MD_REDIS_URL": true}
	for name, v := range vars {
		if v.noDefault == "required" {
			out[name] = true
		}
	}
	return out
}

// TestSecretsAreReferences: the secret variables come from the operator's
// Secret by reference, never from a ConfigMap or a literal; the API is
// given every one it requires; only a variable the binary defaults
// without may be optional.
func TestSecretsAreReferences(t *testing.T) {
	vars := binaryEnv(t)
	secret := secretVars(vars)
	if len(secret) < 5 {
		t.Fatalf("secret variables %v: envTable's required ones are missing", secret)
	}
	for _, r := range renderAll(t) {
		for name, cm := range r.configMaps {
			for k := range cm.Data {
				if secret[k] {
					t.Errorf("%s: ConfigMap %s holds %s", r.dir, name, k)
				}
			}
		}
		for name, pod := range r.pods() {
			for _, c := range allContainers(pod.Spec) {
				cmd := command(t, r.dir, c)
				env := r.containerEnv(t, c)
				for v, e := range env {
					if !secret[v] {
						continue
					}
					ref := e.secretRef
					if ref == nil {
						t.Errorf("%s: %s/%s: %s is a literal or from a ConfigMap, not a secretKeyRef", r.dir, name, c.Name, v)
						continue
					}
					if ref.Name != "marketdata" || ref.Key != v {
						t.Errorf("%s: %s/%s: %s from Secret %s key %s, want Secret marketdata key %s (docs/kubernetes.md)", r.dir, name, c.Name, v, ref.Name, ref.Key, v)
					}
					if ref.Optional != nil && *ref.Optional && !strings.HasPrefix(vars[v].noDefault, "default:") {
						t.Errorf("%s: %s/%s: %s is optional, but the binary has no fallback for it (a missing key would take the local default or refuse to start)", r.dir, name, c.Name, v)
					}
				}
				if cmd != "api" {
					continue
				}
				for v, bv := range vars {
					if bv.noDefault == "required" && bv.readers[readerOf[cmd]] && env[v].secretRef == nil {
						t.Errorf("%s: %s/%s: the API requires %s and is not given it", r.dir, name, c.Name, v)
					}
				}
			}
		}
	}
}

// TestNoSecretCommitted: no file under deploy/k8s holds a Secret with data
// or a secret variable's value, whether a kustomization uses it or not.
func TestNoSecretCommitted(t *testing.T) {
	secret := secretVars(binaryEnv(t))
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var doc struct {
					Kind       string         `yaml:"kind"`
					Data       map[string]any `yaml:"data"`
					StringData map[string]any `yaml:"stringData"`
				}
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Errorf("%s: %v", path, err)
					break
				}
				if doc.Kind == "Secret" && (len(doc.Data) > 0 || len(doc.StringData) > 0) {
					t.Errorf("%s: a Secret with data: the operator creates it (docs/kubernetes.md)", path)
				}
			}
		case ".env":
			for line := range strings.SplitSeq(string(b), "\n") {
				if k, _, ok := strings.Cut(strings.TrimSpace(line), "="); ok && secret[k] {
					t.Errorf("%s: sets %s: it belongs in the Secret", path, k)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPDBs: every Deployment has one PodDisruptionBudget, which selects
// its pods and no other's, and lets a drain take a pod at any replica
// count.
func TestPDBs(t *testing.T) {
	for _, r := range renderAll(t) {
		covered := map[string]int{}
		for name, pdb := range r.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				t.Fatalf("%s: PDB %s: %v", r.dir, name, err)
			}
			targets := r.selected(sel)
			if len(targets) != 1 {
				t.Errorf("%s: PDB %s selects the pods of %v, want one Deployment", r.dir, name, targets)
			}
			for _, dep := range targets {
				covered[dep]++
			}
			mu := pdb.Spec.MaxUnavailable
			if pdb.Spec.MinAvailable != nil || mu == nil || (mu.Type == intstr.Int && mu.IntVal < 1) {
				t.Errorf("%s: PDB %s: want maxUnavailable of at least 1, which never blocks a drain", r.dir, name)
			}
		}
		for name, d := range r.deployments {
			if covered[name] != 1 {
				t.Errorf("%s: Deployment %s is covered by %d PDBs, want 1", r.dir, name, covered[name])
			}
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s: Deployment %s's selector does not match its pods (%v)", r.dir, name, err)
			}
		}
	}
}

// TestReplicasAndHPA: the API autoscales on CPU where a kustomization has
// an autoscaler (and then the Deployment leaves the count to it), else runs
// its fixed count; ingest runs two workers or more.
func TestReplicasAndHPA(t *testing.T) {
	for _, r := range renderAll(t) {
		want := expectations[filepath.ToSlash(r.dir)]
		api, ing := r.deployments["api"], r.deployments["ingest"]
		if api == nil || ing == nil {
			t.Fatalf("%s: api or ingest Deployment missing", r.dir)
		}
		if ing.Spec.Replicas == nil || *ing.Spec.Replicas < minIngestReplicas {
			t.Errorf("%s: ingest replicas %s, want at least %d", r.dir, ptrString(ing.Spec.Replicas), minIngestReplicas)
		}
		if len(r.hpas) > 1 {
			t.Errorf("%s: %d autoscalers, want at most 1", r.dir, len(r.hpas))
		}
		hpa := r.hpas["api"]
		switch {
		case want.apiReplicas > 0:
			if hpa != nil {
				t.Errorf("%s: an autoscaler where the API has a fixed count", r.dir)
			}
			if api.Spec.Replicas == nil || *api.Spec.Replicas != want.apiReplicas {
				t.Errorf("%s: api replicas %v, want %d", r.dir, api.Spec.Replicas, want.apiReplicas)
			}
			continue
		case hpa == nil:
			t.Errorf("%s: no HorizontalPodAutoscaler api", r.dir)
			continue
		}
		ref := hpa.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != "api" || r.deployments[ref.Name] == nil {
			t.Errorf("%s: HPA targets %s %s/%s, want the api Deployment", r.dir, ref.APIVersion, ref.Kind, ref.Name)
		}
		if api.Spec.Replicas != nil {
			t.Errorf("%s: api sets replicas %d beside its autoscaler: every apply would reset the count", r.dir, *api.Spec.Replicas)
		}
		if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < want.hpaMin || hpa.Spec.MaxReplicas <= *hpa.Spec.MinReplicas {
			t.Errorf("%s: HPA bounds %v..%d, want at least %d and room above", r.dir, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, want.hpaMin)
		}
		onCPU := false
		for _, m := range hpa.Spec.Metrics {
			onCPU = onCPU || (m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil)
		}
		if !onCPU {
			t.Errorf("%s: HPA does not scale on CPU utilization", r.dir)
		}
	}
}

// TestTopologySpread: a spread constraint counts the Deployment's own pods;
// prod spreads both Deployments over machines.
func TestTopologySpread(t *testing.T) {
	for _, r := range renderAll(t) {
		for name, d := range r.deployments {
			byHost := false
			for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
				sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("%s: %s: a spread constraint on %s does not count its own pods", r.dir, name, c.TopologyKey)
				}
				byHost = byHost || (c.TopologyKey == "kubernetes.io/hostname" && c.WhenUnsatisfiable == corev1.DoNotSchedule)
			}
			if expectations[filepath.ToSlash(r.dir)].spread && !byHost {
				t.Errorf("%s: %s is not spread over machines", r.dir, name)
			}
		}
	}
}

// TestGracePeriodCoversDrain: the kubelet waits for the shutdown the
// binary does, with the API's preStop sleep in front of it.
func TestGracePeriodCoversDrain(t *testing.T) {
	apiDrain := shutdownBudget(t, "api.go", "runAPIOn")
	ingestAdmin := shutdownBudget(t, "ingest.go", "runIngestOn")
	ingestBatch := ingestBatchBudget(t)
	t.Logf("shutdown: api drain %v after the preStop sleep; ingest batch %v, then admin close %v", apiDrain, ingestBatch, ingestAdmin)
	for _, r := range renderAll(t) {
		for name, d := range r.deployments {
			spec := d.Spec.Template.Spec
			c := spec.Containers[0]
			if spec.TerminationGracePeriodSeconds == nil {
				t.Errorf("%s: %s: no terminationGracePeriodSeconds", r.dir, name)
				continue
			}
			grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
			var need time.Duration
			switch cmd := command(t, r.dir, c); cmd {
			case "api":
				var sleep time.Duration
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
					sleep = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
				}
				// The Terminating pod leaves the endpoints at once; the
				// sleep covers the lag until kube-proxy and the ingress
				// controllers stop sending to it.
				if sleep < 5*time.Second {
					t.Errorf("%s: api: preStop sleep %v, want at least 5s so the Service drops the pod before it drains", r.dir, sleep)
				}
				need = sleep + apiDrain
			case "ingest":
				// Each applier finishes the batch in hand (its deadline,
				// and the pause after a failed one), then the admin
				// server closes. The ack wait bounds neither: the worker
				// sends progress acks for what it holds.
				need = ingestBatch + ingestAdmin
			default:
				t.Fatalf("%s: %s runs %q: what is its shutdown?", r.dir, name, cmd)
			}
			if grace < need {
				t.Errorf("%s: %s: terminationGracePeriodSeconds %v, the shutdown needs up to %v", r.dir, name, grace, need)
			}
		}
	}
}

// TestResources: every container requests CPU and memory and has a memory
// limit, with GOMEMLIMIT about 90 % of it; dev is smaller than prod.
func TestResources(t *testing.T) {
	apiLimit := map[string]int64{}
	for _, r := range renderAll(t) {
		for name, pod := range r.pods() {
			for _, c := range allContainers(pod.Spec) {
				req, lim := c.Resources.Requests, c.Resources.Limits
				if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
					t.Errorf("%s: %s/%s: requests %v limits %v, want CPU and memory requests and a memory limit", r.dir, name, c.Name, req, lim)
					continue
				}
				if lim.Memory().Cmp(*req.Memory()) < 0 {
					t.Errorf("%s: %s/%s: memory limit %v below the request %v", r.dir, name, c.Name, lim.Memory(), req.Memory())
				}
				if command(t, r.dir, c) == "migrate" {
					continue
				}
				env := r.containerEnv(t, c)
				gml, ok := env["GOMEMLIMIT"]
				if !ok || !gml.literal {
					t.Errorf("%s: %s/%s: no GOMEMLIMIT", r.dir, name, c.Name)
					continue
				}
				q, err := resource.ParseQuantity(strings.TrimSuffix(gml.value, "B"))
				if err != nil {
					t.Errorf("%s: %s/%s: GOMEMLIMIT %q: %v", r.dir, name, c.Name, gml.value, err)
					continue
				}
				if ratio := float64(q.Value()) / float64(lim.Memory().Value()); ratio < 0.85 || ratio > 0.95 {
					t.Errorf("%s: %s/%s: GOMEMLIMIT %s is %.0f %% of the memory limit %v, want about 90 %%", r.dir, name, c.Name, gml.value, 100*ratio, lim.Memory())
				}
				if name == "Deployment/api" {
					apiLimit[filepath.ToSlash(r.dir)] = lim.Memory().Value()
				}
			}
		}
	}
	if apiLimit["overlays/dev"] >= apiLimit["overlays/prod"] {
		t.Errorf("api memory limit: dev %d, prod %d bytes; want dev smaller", apiLimit["overlays/dev"], apiLimit["overlays/prod"])
	}
}

// TestConfigChangeRollsPods: a changed value in a generated ConfigMap
// renames it, and the Deployments that read it get a new pod template
// (they roll); the others keep theirs.
func TestConfigChangeRollsPods(t *testing.T) {
	tests := []struct {
		file, line string
		rolls      []string
	}{
		{"base/api.env", "MD_RATE_LIMIT=1300", []string{"api"}},
		{"base/ingest.env", "MD_RESOLVED_RETENTION=72h", []string{"ingest"}},
		{"base/marketdata.env", "MD_REDIS_PREFIX=other:", []string{"api", "ingest"}},
		{"overlays/prod/ingest.env", "MD_RESOLVED_RETENTION=96h", []string{"ingest"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			mem := copyToMemory(t, ".")
			before := render(t, mem, "/k8s/overlays/prod")
			path := filepath.Join("/k8s", tt.file)
			b, err := mem.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := mem.WriteFile(path, append(b, []byte("\n"+tt.line+"\n")...)); err != nil {
				t.Fatal(err)
			}
			after := render(t, mem, "/k8s/overlays/prod")
			for name, d := range before.deployments {
				changed := !reflect.DeepEqual(d.Spec.Template, after.deployments[name].Spec.Template)
				want := false
				for _, n := range tt.rolls {
					want = want || n == name
				}
				if changed != want {
					t.Errorf("%s after %q: pod template changed %v, want %v", name, tt.line, changed, want)
				}
			}
		})
	}
}

// TestDocsNameStreamsMetric: the metric the docs offer for scaling a
// stream-heavy fleet is one the node exports.
func TestDocsNameStreamsMetric(t *testing.T) {
	const metric = "marketdata_streams_open"
	src, err := os.ReadFile("../../api/stream/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `Name: "`+metric+`"`) {
		t.Fatalf("api/stream/metrics.go defines no %s: update docs/kubernetes.md and base/api-hpa.yaml", metric)
	}
	for _, path := range []string{"../../docs/kubernetes.md", "base/api-hpa.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), metric) {
			t.Errorf("%s does not name %s", path, metric)
		}
	}
}
