package k8s

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The client address the API judges (a key's IP allowlist, the
// failed-authentication limit) is the TCP peer, unless the peer is in
// MD_TRUSTED_PROXIES; then it is what the peer says in X-Forwarded-For
// (api/clientip.go). Two things keep a client from choosing it: the trusted
// ranges hold the ingress controller and nothing more, and the network
// policies let nothing else reach the public port.

// trustedPlaceholder is the prod overlay's MD_TRUSTED_PROXIES until the
// operator names the ingress controller's addresses. It is no CIDR, so the
// API refuses to start on it.
const trustedPlaceholder = "SET-ME-ingress-controller-pod-cidr"

// maxTrustedHostBits bounds a trusted prefix to 4,096 addresses (an IPv4
// /20): the pod CIDRs of a few machines, never a private range or a
// cluster's whole pod network, whose every pod could name any address.
const maxTrustedHostBits = 12

// The namespaces whose pods may reach the API nodes' ports, by the
// kubernetes.io/metadata.name label every namespace has.
const (
	ingressNamespace    = "ingress-nginx" // the ingress controller: the public port
	monitoringNamespace = "monitoring"    // Prometheus: the admin port
)

// nsLabel is the label Kubernetes sets on every namespace to its name.
const nsLabel = "kubernetes.io/metadata.name"

// checkTrusted refuses an MD_TRUSTED_PROXIES value that the binary would
// refuse or that trusts a range wider than maxTrustedHostBits. It parses as
// the binary does (parseCIDR in cmd/marketdata/config.go): a CIDR or a
// single address, comma-separated, blanks skipped.
func checkTrusted(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR or an address", p)
			}
			prefix = netip.PrefixFrom(a, a.BitLen())
		}
		if host := prefix.Addr().BitLen() - prefix.Bits(); host > maxTrustedHostBits {
			return fmt.Errorf("%s trusts 2^%d addresses, more than 2^%d: name the ingress controller's pods, not a range they are in", p, host, maxTrustedHostBits)
		}
	}
	return nil
}

func TestCheckTrusted(t *testing.T) {
	tests := []struct {
		v  string
		ok bool
	}{
		{"", true},
		{"10.244.0.0/20", true},
		{"10.244.3.0/24, 10.244.7.0/24", true},
		{"10.1.2.3", true},
		{"2001:db8::/116", true},
		{"10.0.0.0/8,172.16.0.0/12,192.168.0.0/16", false}, // the private ranges
		{"10.0.0.0/8", false},
		{"172.16.0.0/12", false},
		{"192.168.0.0/16", false},
		{"10.244.0.0/16", false}, // a cluster's pod network
		{"10.244.0.0/19", false},
		{"10.244.3.0/24,0.0.0.0/0", false},
		{"::ffff:0:0/96", false}, // every IPv4 address, mapped
		{"fd00::/64", false},
		{trustedPlaceholder, false},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			if err := checkTrusted(tt.v); (err == nil) != tt.ok {
				t.Errorf("checkTrusted(%q) = %v, want ok %v", tt.v, err, tt.ok)
			}
		})
	}
}

// TestTrustedProxies: the base trusts no one; an overlay behind an ingress
// controller trusts narrow ranges only, or carries the placeholder, which
// the binary refuses (so an unedited overlay fails at start, naming the
// variable, instead of trusting a guess).
func TestTrustedProxies(t *testing.T) {
	for _, r := range renderAll(t) {
		d := r.deployments["api"]
		if d == nil {
			t.Fatalf("%s: no Deployment api", r.dir)
		}
		v := r.containerEnv(t, d.Spec.Template.Spec.Containers[0])["MD_TRUSTED_PROXIES"]
		if v.secretRef != nil {
			t.Errorf("%s: MD_TRUSTED_PROXIES from a Secret: it is configuration, in api.env", r.dir)
			continue
		}
		trusts := strings.TrimSpace(v.value) != ""
		switch want := expectations[filepath.ToSlash(r.dir)].trustsProxies; {
		case trusts != want:
			t.Errorf("%s: MD_TRUSTED_PROXIES=%q; want it set %v (the base trusts no one)", r.dir, v.value, want)
		case v.value == trustedPlaceholder:
			if checkTrusted(v.value) == nil {
				t.Errorf("%s: the placeholder %q parses as a CIDR: the API would start on it", r.dir, v.value)
			}
		default:
			if err := checkTrusted(v.value); err != nil {
				t.Errorf("%s: MD_TRUSTED_PROXIES: %v", r.dir, err)
			}
		}
	}
}

// inbound is who may open a connection to a pod under the rendered
// policies: its container ports (by name) and the namespaces allowed to
// each, sorted. isolated is false when no policy selects the pod (then
// anything may connect).
func (r *rendered) inbound(t *testing.T, pod corev1.PodTemplateSpec) (in map[string][]string, isolated bool) {
	t.Helper()
	in = map[string][]string{}
	for name, p := range r.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("%s: NetworkPolicy %s: %v", r.dir, name, err)
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		for _, pt := range p.Spec.PolicyTypes {
			switch pt {
			case networkingv1.PolicyTypeIngress:
				isolated = true
			default:
				// The pods reach Postgres, Redis, NATS and DNS at addresses
				// only the operator knows.
				t.Errorf("%s: NetworkPolicy %s restricts %s", r.dir, name, pt)
			}
		}
		for i, rule := range p.Spec.Ingress {
			if len(rule.From) == 0 || len(rule.Ports) == 0 {
				t.Errorf("%s: NetworkPolicy %s rule %d: from %d peers on %d ports; an empty list means everyone or every port", r.dir, name, i, len(rule.From), len(rule.Ports))
				continue
			}
			var namespaces []string
			for _, peer := range rule.From {
				ns := peer.NamespaceSelector
				if peer.PodSelector != nil || peer.IPBlock != nil || ns == nil || len(ns.MatchExpressions) != 0 || len(ns.MatchLabels) != 1 || ns.MatchLabels[nsLabel] == "" {
					t.Errorf("%s: NetworkPolicy %s rule %d: peer %+v; want a namespace by its %s label only", r.dir, name, i, peer, nsLabel)
					continue
				}
				namespaces = append(namespaces, ns.MatchLabels[nsLabel])
			}
			for _, port := range rule.Ports {
				if (port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP) || port.Port == nil || port.EndPort != nil {
					t.Errorf("%s: NetworkPolicy %s rule %d: port %+v; want one TCP port", r.dir, name, i, port)
					continue
				}
				portName, ok := containerPortName(pod.Spec, *port.Port)
				if !ok {
					t.Errorf("%s: NetworkPolicy %s rule %d: port %s is no port of the pods it selects", r.dir, name, i, port.Port.String())
					continue
				}
				in[portName] = append(in[portName], namespaces...)
			}
		}
	}
	for k, v := range in {
		slices.Sort(v)
		in[k] = slices.Compact(v)
	}
	return in, isolated
}

// containerPortName is the name of the container port p (a number or a
// name) designates on a pod.
func containerPortName(spec corev1.PodSpec, p intstr.IntOrString) (string, bool) {
	for _, c := range spec.Containers {
		for _, cp := range c.Ports {
			if (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) || (p.Type == intstr.String && cp.Name == p.StrVal) {
				return cp.Name, true
			}
		}
	}
	return "", false
}

// wantInbound is who may reach each command's pods: the ingress controller
// the public port, Prometheus the admin port (/metrics; /readyz and
// /debug/pprof are there too), nothing else.
func wantInbound(ingress, monitoring string) map[string]map[string][]string {
	return map[string]map[string][]string{
		"api":     {"http": {ingress}, "admin": {monitoring}},
		"ingest":  {"admin": {monitoring}},
		"migrate": {},
	}
}

// checkPolicies compares every pod's inbound access with want and refuses
// a policy that selects none of the pods (a mistyped selector).
func checkPolicies(t *testing.T, r *rendered, want map[string]map[string][]string) {
	t.Helper()
	pods := r.pods()
	for name, pod := range pods {
		if len(pod.Spec.Containers) != 1 {
			t.Errorf("%s: %s: %d containers, want 1", r.dir, name, len(pod.Spec.Containers))
			continue
		}
		cmd := command(t, r.dir, pod.Spec.Containers[0])
		w, known := want[cmd]
		if !known {
			t.Errorf("%s: %s runs %q: who may connect to it?", r.dir, name, cmd)
			continue
		}
		got, isolated := r.inbound(t, pod)
		if !isolated {
			t.Errorf("%s: %s: no NetworkPolicy selects its pods: anything may connect", r.dir, name)
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s: inbound by port %v, want %v", r.dir, name, got, w)
		}
	}
	for name, p := range r.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("%s: NetworkPolicy %s: %v", r.dir, name, err)
		}
		selects := false
		for _, pod := range pods {
			selects = selects || sel.Matches(labels.Set(pod.Labels))
		}
		if !selects {
			t.Errorf("%s: NetworkPolicy %s selects none of the pods (%s)", r.dir, name, sel)
		}
	}
}

// TestNetworkPolicies: every pod is isolated; the API's public port
// admits the ingress controller's namespace only and the admin ports
// Prometheus' only, on the containers' real ports; the migrate Job admits
// nothing.
func TestNetworkPolicies(t *testing.T) {
	for _, r := range renderAll(t) {
		checkPolicies(t, r, wantInbound(ingressNamespace, monitoringNamespace))
	}
}

// TestNetworkPolicyPatchInDocs: the patch docs/kubernetes.md gives for
// another ingress controller's or Prometheus' namespace, added to an
// overlay, moves exactly those rules.
func TestNetworkPolicyPatchInDocs(t *testing.T) {
	// The namespaces the docs' example names.
	checkPolicies(t, withDocPatches(t, "kind: NetworkPolicy"), wantInbound("traefik", "observability"))
}
