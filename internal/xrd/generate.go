//go:build generate

// The XRDs of the Configuration package, generated from the Go types.
// Run it with: go generate -tags generate ./internal/xrd
//go:generate go run ./cmd/generate ../../package/configuration

package xrd

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen" // pins controller-gen in go.mod
)
