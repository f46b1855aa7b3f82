// Package e2e tests the function end to end through the real crossplane
// CLI: every example scenario under example/ is rendered with crossplane
// render against the function run locally, compared with a golden file,
// and its composed resources are validated against the upstream CRDs of
// the APIs they target. See harness for the machinery and validate for
// the CRD validation.
//
//	go test ./test/e2e/...                      # everything
//	go test ./test/e2e -run TestRender -update  # rewrite the golden files
//
// The first run builds the crossplane CLI into bin/, which takes minutes.
// These tests run in -short mode too: they are part of the README's fast
// test command.
package e2e
