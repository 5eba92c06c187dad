// Package k8s holds no code: its tests render the Kubernetes manifests
// beside it (kustomize base and overlays) and check them against the
// binary's own addresses, routes, variables and shutdown timings.
package k8s
