//go:build tools

// The Kubernetes commands the real-cluster stage builds (scripts/real-cluster/build.sh).
// k8s.io/kubernetes cannot be built with `go install pkg@version`: its go.mod requires every
// staging module at v0.0.0 and replaces them with ./staging paths, which only apply inside
// that repository. This module replaces each with its published version instead.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
