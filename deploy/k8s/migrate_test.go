package k8s

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// minMigrateRetries is the least backoffLimit the Job may have: migrate
// exits at once while Postgres is down, and each retry is a restart.
const minMigrateRetries = 10

// TestMigrateJob: the schema is migrated by the Job migrate alone, with the
// release's image and nothing but MD_DATABASE_URL from the Secret; it
// retries through a Postgres outage, goes away by itself, and no Service,
// budget or Deployment counts its pod.
func TestMigrateJob(t *testing.T) {
	for _, r := range renderAll(t) {
		for name, d := range r.deployments {
			spec := d.Spec.Template.Spec
			if len(spec.InitContainers) != 0 {
				t.Errorf("%s: %s has init containers: a pod must start while Postgres is down", r.dir, name)
			}
			for _, c := range allContainers(spec) {
				if command(t, r.dir, c) == "migrate" {
					t.Errorf("%s: %s/%s runs migrate: only the Job migrates", r.dir, name, c.Name)
				}
			}
		}
		if len(r.jobs) != 1 || r.jobs["migrate"] == nil {
			t.Errorf("%s: Jobs %s, want migrate alone", r.dir, sortedKeys(r.jobs))
			continue
		}
		job := r.jobs["migrate"]
		spec := job.Spec.Template.Spec
		if len(spec.InitContainers) != 0 || len(spec.Containers) != 1 {
			t.Fatalf("%s: Job migrate: %d init containers and %d containers, want one container", r.dir, len(spec.InitContainers), len(spec.Containers))
		}
		c := spec.Containers[0]
		if cmd := command(t, r.dir, c); cmd != "migrate" || len(c.Args) != 1 {
			t.Errorf("%s: Job migrate runs %q, want migrate", r.dir, c.Args)
		}
		env := r.containerEnv(t, c)
		ref := env["MD_DATABASE_URL"].secretRef
		if len(env) != 1 || len(c.EnvFrom) != 0 || ref == nil || ref.Name != "marketdata" || ref.Key != "MD_DATABASE_URL" || (ref.Optional != nil && *ref.Optional) {
			t.Errorf("%s: Job migrate's environment %s (envFrom %d); want MD_DATABASE_URL alone, from Secret marketdata, required", r.dir, sortedKeys(env), len(c.EnvFrom))
		}
		if len(c.Ports) != 0 || c.StartupProbe != nil || c.ReadinessProbe != nil || c.LivenessProbe != nil {
			t.Errorf("%s: Job migrate has ports or probes: migrate serves nothing", r.dir)
		}
		for _, dep := range []string{"api", "ingest"} {
			if d := r.deployments[dep]; d != nil && d.Spec.Template.Spec.Containers[0].Image != c.Image {
				t.Errorf("%s: Job migrate runs image %q, %s runs %q: the Job must apply the schema the release's binary needs", r.dir, c.Image, dep, d.Spec.Template.Spec.Containers[0].Image)
			}
		}

		if spec.RestartPolicy != corev1.RestartPolicyOnFailure {
			t.Errorf("%s: Job migrate restartPolicy %q, want OnFailure (a retry restarts the container in place)", r.dir, spec.RestartPolicy)
		}
		if b := job.Spec.BackoffLimit; b == nil || *b < minMigrateRetries {
			t.Errorf("%s: Job migrate backoffLimit %s, want at least %d: it retries through a Postgres outage", r.dir, ptrString(b), minMigrateRetries)
		}
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl <= 0 {
			t.Errorf("%s: Job migrate ttlSecondsAfterFinished %s, want it removed after a while, so the next release can create it", r.dir, ptrString(ttl))
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.ServiceAccountName != "" {
			t.Errorf("%s: Job migrate: service account %q, automountServiceAccountToken %s; want no token", r.dir, spec.ServiceAccountName, ptrString(spec.AutomountServiceAccountToken))
		}
		if api := r.deployments["api"]; api != nil {
			apiSpec := api.Spec.Template.Spec
			if !reflect.DeepEqual(spec.SecurityContext, apiSpec.SecurityContext) || !reflect.DeepEqual(c.SecurityContext, apiSpec.Containers[0].SecurityContext) {
				t.Errorf("%s: Job migrate's security contexts differ from the API pod's", r.dir)
			}
		}

		pod := labels.Set(job.Spec.Template.Labels)
		var selectors []string
		for name, s := range r.services {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(pod) {
				selectors = append(selectors, "Service/"+name)
			}
		}
		for name, p := range r.pdbs {
			if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && sel.Matches(pod) {
				selectors = append(selectors, "PodDisruptionBudget/"+name)
			}
		}
		for name, d := range r.deployments {
			if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && sel.Matches(pod) {
				selectors = append(selectors, "Deployment/"+name)
			}
		}
		if len(selectors) != 0 {
			t.Errorf("%s: the Job migrate's pod (%v) is selected by %v", r.dir, pod, selectors)
		}
	}
}

// ptrString shows an optional field for messages.
func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
