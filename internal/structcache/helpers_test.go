package structcache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type obj = map[string]any

// modelRoute16 returns the desired objects of a ready ModelRoute of
// v1alpha1.MaxBackends (16) backends, each with an API key, by resource
// name: what fn's RunFunction desired for its routeRequest(t, 16) when this
// file was written, decoded afresh on every call, so that a test may change
// them. They stand for the objects the cache holds: their shapes, not their
// exact values, are what the tests need, so they need not follow every
// change of the function's output.
func modelRoute16(t testing.TB) map[string]obj {
	t.Helper()
	m := map[string]obj{}
	readJSON(t, "modelroute-16.json", &m)
	return m
}

// aiGatewayRoute returns the desired AIGatewayRoute Object of a ready
// ModelRoute of one backend, fn's routeRequest(t, 1), when this file was
// written.
func aiGatewayRoute(t testing.TB) obj {
	t.Helper()
	o := obj{}
	readJSON(t, "aigatewayroute.json", &o)
	return o
}

func readJSON(t testing.TB, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("cannot read testdata/%s: %v", name, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("cannot decode testdata/%s: %v", name, err)
	}
}
