package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/route"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// Scenario 5k: a backend of Amazon Bedrock, signed with an AWS credentials
// file from a control-plane Secret.
const (
	cloudRouteName  = "cloud-model"
	cloudBackend    = "bedrock"
	cloudSecret     = "aws-creds"
	cloudKeyID      = "AKIACONTROLPLANE0001"
	cloudSecretPart = "controlplane-example-only-aws-secret"
	cloudRegion     = "eu-west-1"
)

// cloudCredentials is scenario 5k: the real AI Gateway accepts the
// AWSCredentials BackendSecurityPolicy the route composes, and writes the
// credentials file, with the region, into the backend's auth in its
// filter-config Secret, from which its ext_proc signs (ai-gateway v1.0.0
// internal/controller/gateway.go, bspToFilterAPIBackendAuth;
// internal/filterapi/filterconfig.go, AWSAuth). The secret access key is
// in no Object, XR or event.
func (sc *scenarios) cloudCredentials(t *testing.T) {
	c, w := sc.c, sc.w
	file := "[default]\naws_access_key_id = " + cloudKeyID + "\naws_secret_access_key = " + cloudSecretPart + "\n"
	// The world looks for them in every Object, XR and event it observes.
	w.Forbid("the AWS credentials file", base64.StdEncoding.EncodeToString([]byte(file)))
	w.Forbid("the AWS secret access key", base64.StdEncoding.EncodeToString([]byte(cloudSecretPart)))
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: cloudSecret, Namespace: harness.TeamControlNS},
		Data:       map[string][]byte{"credentials": []byte(file)}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	harness.Must(t, err)
	c.Create(sc.ctx, harness.GVRSecret, &unstructured.Unstructured{Object: m})

	r := plainRoute(cloudRouteName, "unused.example.com")
	r.Object["spec"].(map[string]any)["backends"] = []any{map[string]any{
		"name":     cloudBackend,
		"endpoint": map[string]any{"hostname": "bedrock-runtime." + cloudRegion + ".amazonaws.com"},
		"schema":   map[string]any{"name": "AWSBedrock"},
		"credentials": map[string]any{"aws": map[string]any{
			"region": cloudRegion, "secretRef": map[string]any{"name": cloudSecret, "key": "credentials"},
		}},
	}}
	created := time.Now()
	c.Apply(sc.ctx, r)
	policy := names.BackendObject(cloudRouteName, cloudBackend)
	sc.eventually(t, waitRoute, "the Bedrock route RoutingReady, its AWSCredentials policy accepted and the credentials in AI Gateway's filter config", func(ctx context.Context) string {
		xr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, cloudRouteName)
		if err != nil {
			return err.Error()
		}
		if st := harness.ConditionStatus(xr, route.ConditionType); st != "True" {
			return fmt.Sprintf("RoutingReady=%s (%s): %v", st, harness.ConditionReason(xr, route.ConditionType), harness.Condition(xr, route.ConditionType)["message"])
		}
		bsp, err := sc.get(ctx, harness.GVRSecPolicy, w.TeamNS, policy)
		if err != nil {
			return fmt.Sprintf("the BackendSecurityPolicy %s: %v", policy, err)
		}
		if typ, _, _ := unstructured.NestedString(bsp.Object, "spec", "type"); typ != "AWSCredentials" {
			return fmt.Sprintf("the BackendSecurityPolicy %s is of type %q, want AWSCredentials", policy, typ)
		}
		// AI Gateway's condition types are Accepted and NotAccepted
		// (ai-gateway v1.0.0 api/v1beta1/status.go).
		if st := harness.ConditionStatus(bsp, "Accepted"); st != "True" {
			return fmt.Sprintf("the BackendSecurityPolicy %s: Accepted=%q (%v)", policy, st, harness.Condition(bsp, "NotAccepted")["message"])
		}
		return sc.filterConfigHasAWS(ctx)
	})
	t.Logf("scenario 5k: the Bedrock route RoutingReady, its AWSCredentials policy accepted by AI Gateway and the credentials file with region %s in its filter config, %s after the route's creation",
		cloudRegion, time.Since(created).Round(time.Second))

	// The copy on the gateway cluster holds the file under credentials,
	// where AI Gateway reads it; no Object, XR or event holds it.
	cp, err := sc.get(sc.ctx, harness.GVRSecret, w.TeamNS, policy)
	harness.Must(t, err)
	if got, _, _ := unstructured.NestedString(cp.Object, "data", "credentials"); got != base64.StdEncoding.EncodeToString([]byte(file)) {
		t.Errorf("the Secret copy %s/%s does not hold the control plane's credentials file under credentials (keys: %v)", w.TeamNS, policy, slices.Sorted(maps.Keys(dataOf(cp))))
	}
	sc.noSecretsInObjects(t, "scenario 5k")

	// Leave as found.
	for _, a := range []harness.Allowance{
		{Reason: "scenario 5k deletes its route", Resource: "backendsecuritypolicies", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "secrets", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "backends", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "aiservicebackends", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its credentials", Resource: "secrets", Namespace: harness.TeamControlNS, Name: cloudSecret},
	} {
		w.Allow(a)
	}
	sc.deleteRoute(t, cloudRouteName, "scenario 5k deletes its route")
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Delete(sc.ctx, cloudSecret, metav1.DeleteOptions{}))
}

// filterConfigHasAWS returns "" when AI Gateway's filter-config Secret
// gives the Bedrock backend AWS auth for cloudRegion whose credentials
// file names cloudKeyID. It never prints the file.
func (sc *scenarios) filterConfigHasAWS(ctx context.Context) string {
	s, err := sc.get(ctx, harness.GVRSecret, harness.EnvoyGatewayNS, filterConfigSecret)
	if err != nil {
		return err.Error()
	}
	enc, _, _ := unstructured.NestedString(s.Object, "data", "filter-config.yaml")
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return fmt.Sprintf("cannot decode the filter-config Secret's filter-config.yaml: %v", err)
	}
	var cfg struct {
		Backends []struct {
			Name string `json:"name"`
			Auth *struct {
				AWS *struct {
					CredentialFileLiteral string `json:"credentialFileLiteral"`
					Region                string `json:"region"`
				} `json:"aws"`
			} `json:"auth"`
		} `json:"backends"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return fmt.Sprintf("cannot read the filter config: %v", err)
	}
	var seen []string
	for _, b := range cfg.Backends {
		seen = append(seen, b.Name)
		// AI Gateway names a backend of its filter config
		// <namespace>/<AIServiceBackend>/route/<route>/rule/<i>/ref/<j>
		// (ai-gateway v1.0.0 internal/internalapi/internalapi.go,
		// PerRouteRuleRefBackendName).
		if !strings.Contains(b.Name, "/"+names.BackendObject(cloudRouteName, cloudBackend)+"/route/") {
			continue
		}
		switch {
		case b.Auth == nil || b.Auth.AWS == nil:
			return fmt.Sprintf("the filter config's backend %s has no AWS auth", b.Name)
		case b.Auth.AWS.Region != cloudRegion:
			return fmt.Sprintf("the filter config's backend %s signs for region %q, want %q", b.Name, b.Auth.AWS.Region, cloudRegion)
		case !strings.Contains(b.Auth.AWS.CredentialFileLiteral, "aws_access_key_id = "+cloudKeyID):
			return fmt.Sprintf("the filter config's backend %s has a credentials file without the key id %s", b.Name, cloudKeyID)
		}
		return ""
	}
	return fmt.Sprintf("the filter config has no backend %s yet (backends: %v)", names.BackendObject(cloudRouteName, cloudBackend), seen)
}

// dataOf is a Secret's data, for its keys: never print the values.
func dataOf(u *unstructured.Unstructured) map[string]any {
	m, _, _ := unstructured.NestedMap(u.Object, "data")
	return m
}
