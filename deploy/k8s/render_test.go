package k8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// rendered is one kustomization built and decoded into the API types.
type rendered struct {
	dir         string
	objects     []string // "Kind/name", in kustomize's output order
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	jobs        map[string]*batchv1.Job
	policies    map[string]*networkingv1.NetworkPolicy
}

// kustomizations are the directories the tests render: the base and every
// overlay found under overlays/ (a new overlay is rendered without being
// named here).
func kustomizations(t *testing.T) []string {
	t.Helper()
	dirs := []string{"base"}
	entries, err := os.ReadDir("overlays")
	if err != nil {
		t.Fatalf("read overlays: %v", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("overlays", e.Name()))
		}
	}
	if len(dirs) < 3 {
		t.Fatalf("kustomizations: %v, want the base and the dev and prod overlays", dirs)
	}
	return dirs
}

// renderAll renders every kustomization from disk.
func renderAll(t *testing.T) []*rendered {
	t.Helper()
	var out []*rendered
	for _, dir := range kustomizations(t) {
		out = append(out, render(t, filesys.MakeFsOnDisk(), dir))
	}
	return out
}

// render builds dir with kustomize, as `kubectl apply -k` would, and
// decodes every object strictly: a field the API types do not have (a
// misspelled or misplaced key, which kubectl would reject or drop) fails.
func render(t *testing.T, fsys filesys.FileSystem, dir string) *rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{
		dir:         dir,
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
		hpas:        map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		jobs:        map[string]*batchv1.Job{},
		policies:    map[string]*networkingv1.NetworkPolicy{},
	}
	for _, res := range m.Resources() {
		b, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %s/%s: %v", dir, res.GetKind(), res.GetName(), err)
		}
		kind, apiVersion, name := res.GetKind(), res.GetApiVersion(), res.GetName()
		r.objects = append(r.objects, kind+"/"+name)
		var dst any
		switch kind + " " + apiVersion {
		case "Deployment apps/v1":
			d := &appsv1.Deployment{}
			r.deployments[name], dst = d, d
		case "Service v1":
			s := &corev1.Service{}
			r.services[name], dst = s, s
		case "ConfigMap v1":
			c := &corev1.ConfigMap{}
			r.configMaps[name], dst = c, c
		case "PodDisruptionBudget policy/v1":
			p := &policyv1.PodDisruptionBudget{}
			r.pdbs[name], dst = p, p
		case "HorizontalPodAutoscaler autoscaling/v2":
			h := &autoscalingv2.HorizontalPodAutoscaler{}
			r.hpas[name], dst = h, h
		case "Job batch/v1":
			j := &batchv1.Job{}
			r.jobs[name], dst = j, j
		case "NetworkPolicy networking.k8s.io/v1":
			p := &networkingv1.NetworkPolicy{}
			r.policies[name], dst = p, p
		default:
			// A Secret lands here too: the repository holds none.
			t.Errorf("%s: %s %s/%s: no test checks this kind; decode and check it here", dir, apiVersion, kind, name)
			continue
		}
		if err := decodeStrict(b, dst); err != nil {
			t.Errorf("%s: %s/%s does not decode into the %s type: %v", dir, kind, name, apiVersion, err)
		}
	}
	return r
}

// decodeStrict decodes JSON refusing fields the destination lacks.
func decodeStrict(b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// copyToMemory copies the manifests under root into an in-memory file
// system at /k8s, for renders of edited copies.
func copyToMemory(t *testing.T, root string) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dst := filepath.Join("/k8s", rel)
		if d.IsDir() {
			return mem.MkdirAll(dst)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(dst, b)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", root, err)
	}
	return mem
}

// containerEnv is what a container's process sees in its environment, as
// far as the manifests decide it: each variable's literal value, or where
// it comes from.
type envSource struct {
	value     string
	literal   bool // value holds the variable's value
	secretRef *corev1.SecretKeySelector
	configMap string // the generated ConfigMap the value came from
}

// containerEnv resolves a container's env and envFrom against the
// rendered ConfigMaps (env wins over envFrom, as in the kubelet).
func (r *rendered) containerEnv(t *testing.T, c corev1.Container) map[string]envSource {
	t.Helper()
	out := map[string]envSource{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := r.configMaps[from.ConfigMapRef.Name]
			if cm == nil {
				t.Errorf("%s: container %s: envFrom ConfigMap %q is not in the render", r.dir, c.Name, from.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				out[from.Prefix+k] = envSource{value: v, literal: true, configMap: cm.Name}
			}
		default:
			// A whole Secret's keys cannot be checked against what the
			// binary reads: name each variable with a secretKeyRef.
			t.Errorf("%s: container %s: envFrom other than a ConfigMap (%+v)", r.dir, c.Name, from)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = envSource{value: e.Value, literal: true}
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = envSource{secretRef: e.ValueFrom.SecretKeyRef}
		default:
			t.Errorf("%s: container %s: %s comes from neither a value nor a Secret", r.dir, c.Name, e.Name)
		}
	}
	return out
}

// command is the marketdata subcommand a container runs: the image's
// entrypoint is the binary, the first argument the command.
func command(t *testing.T, dir string, c corev1.Container) string {
	t.Helper()
	if len(c.Command) != 0 || len(c.Args) == 0 {
		t.Fatalf("%s: container %s: command %q args %q; want the image's entrypoint and the subcommand as the first argument", dir, c.Name, c.Command, c.Args)
	}
	return c.Args[0]
}

// allContainers are a pod's init containers and containers.
func allContainers(spec corev1.PodSpec) []corev1.Container {
	return slices.Concat(spec.InitContainers, spec.Containers)
}

// pods are the pod templates of every workload, the Deployments' and the
// Jobs', by "Kind/name".
func (r *rendered) pods() map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for name, d := range r.deployments {
		out["Deployment/"+name] = d.Spec.Template
	}
	for name, j := range r.jobs {
		out["Job/"+name] = j.Spec.Template
	}
	return out
}

// sortedKeys lists a set for messages.
func sortedKeys[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
