//go:build generate

// Package input generates the Input's deepcopy functions and its CRD in
// package/input. Run it with: go generate -tags generate ./internal/input
// Remove existing and generate new input manifests
//go:generate rm -rf ../../package/input/
//go:generate go run -tags generate sigs.k8s.io/controller-tools/cmd/controller-gen paths=./v1beta1 object crd:crdVersions=v1 output:artifacts:config=../../package/input

package input

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen" // pins controller-gen in go.mod
)
