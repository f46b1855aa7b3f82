package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// keyRotated is scenario 5b: the team rotates the API key in the
// control plane's Secret. The new key must reach the gateway cluster's
// Secret, through provider-kubernetes alone, and never an Object, and AI
// Gateway's filter-config Secret after it, within waitRotation.
func (sc *scenarios) keyRotated(t *testing.T) {
	w := sc.w
	plain := "sk-or-v1-rotated-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	rotated := base64.StdEncoding.EncodeToString([]byte(plain))
	w.Forbid("the rotated openrouter API key", rotated)
	start := time.Now()
	sc.setAPIKey(t, harness.APIKeySecret, rotated)
	deadline := start.Add(waitRotation)
	sc.eventually(t, time.Until(deadline), "the rotated API key in the gateway cluster's Secret", func(ctx context.Context) string {
		return sc.gatewayKeyIs(ctx, rotated)
	})
	copied := time.Since(start)
	t.Logf("the rotated key reached the gateway cluster's Secret %s after the control plane's changed", copied.Round(time.Millisecond))
	sc.eventually(t, time.Until(deadline), "the rotated API key in AI Gateway's filter-config Secret", func(ctx context.Context) string {
		return sc.filterConfigHasKey(ctx, plain)
	})
	configured := time.Since(start)
	t.Logf("and AI Gateway's filter-config Secret %s after it", configured.Round(time.Millisecond))
	sc.sp.Record("key-rotation", "key-rotation-delivered", seconds(copied))
	sc.sp.Record("key-rotation", "key-rotation-in-filter-config", seconds(configured))
	sc.eventually(t, waitRoute, "RoutingReady=True", func(ctx context.Context) string {
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.noSecretsInObjects(t, "after the API key was rotated")
	sc.noDeletions(t)
	w.Check(t)
}

// filterConfigHasKey returns "" when AI Gateway's filter-config Secret
// for the suite's gateway holds the API key plain: AI Gateway reads the
// BackendSecurityPolicy's Secret and writes its key in clear into the
// filter config (ai-gateway v1.0.0 internal/controller/gateway.go,
// bspToFilterAPIBackendAuth and FilterConfigKeyInSecret;
// internal/filterapi/filterconfig.go, APIKeyAuth.Key). It never prints
// the key.
func (sc *scenarios) filterConfigHasKey(ctx context.Context, plain string) string {
	s, err := sc.get(ctx, harness.GVRSecret, harness.EnvoyGatewayNS, filterConfigSecret)
	if err != nil {
		return err.Error()
	}
	enc, _, _ := unstructured.NestedString(s.Object, "data", "filter-config.yaml")
	cfg, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return fmt.Sprintf("cannot decode the filter-config Secret's filter-config.yaml: %v", err)
	}
	if !strings.Contains(string(cfg), plain) {
		return fmt.Sprintf("the filter-config Secret %s/%s (%d bytes of config) does not hold the control plane's key yet", harness.EnvoyGatewayNS, filterConfigSecret, len(cfg))
	}
	return ""
}
