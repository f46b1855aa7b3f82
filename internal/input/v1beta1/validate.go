package v1beta1

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// HeaderName is an HTTP header name as Gateway API takes it in a header
// match (sigs.k8s.io/gateway-api v1.5.1 apis/v1/shared_types.go,
// HTTPHeaderName: RFC 7230's token).
var HeaderName = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`)

// Validate checks an Input with its defaults applied (WithDefaults): what
// its CRD's schema says, for crossplane render, which never checks a
// pipeline step's input against it, and what the schema cannot say. Every
// value here reaches a Kubernetes name or an Envoy header match on the
// gateway cluster. Its error names the field and the fix, in the same
// words every time.
func (in *Input) Validate() error {
	bad := func(format string, a ...any) error {
		return errors.Errorf("cannot use the function Input: "+format, a...)
	}
	for _, f := range []struct{ field, value, example string }{
		{"gatewayNamespace", in.GatewayNamespace, names.DefaultGatewayNamespace},
		{"gatewayName", in.GatewayName, names.DefaultGatewayName},
		{"objectNamespace", in.ObjectNamespace, names.DefaultObjectNamespace},
		{"envoyGatewayNamespace", in.EnvoyGatewayNamespace, names.DefaultEnvoyGatewayNamespace},
	} {
		if errs := validation.IsDNS1123Label(f.value); len(errs) > 0 {
			return bad("%s %q is not a DNS label (%s); set one such as %s", f.field, f.value, strings.Join(errs, "; "), f.example)
		}
	}
	if errs := validation.IsDNS1123Subdomain(in.GatewayClassName); len(errs) > 0 {
		return bad("gatewayClassName %q is not a GatewayClass name (%s); set one such as %s", in.GatewayClassName, strings.Join(errs, "; "), names.DefaultGatewayClassName)
	}
	if errs := validation.IsDNS1123Subdomain(in.ClusterDomain); len(errs) > 0 {
		return bad("clusterDomain %q is not a DNS name (%s); set one such as %s", in.ClusterDomain, strings.Join(errs, "; "), names.DefaultClusterDomain)
	}
	for i, a := range in.ExtProcMarkerAnnotations {
		if errs := validation.IsQualifiedName(a); len(errs) > 0 {
			return bad("extProcMarkerAnnotations[%d] %q is not an annotation key (%s); set one such as %s", i, a, strings.Join(errs, "; "), markerUUID)
		}
	}
	if err := in.validateAnchorHeader(); err != nil {
		return bad("%s", err.Error())
	}
	if v := in.InferenceGatewayAPIVersion; v != "" {
		gv, err := schema.ParseGroupVersion(v)
		if err != nil || gv.Group == "" || gv.Version == "" {
			return bad("inferenceGatewayAPIVersion %q is not an apiVersion of the form <group>/<version>; set one such as modelplane.ai/v1alpha1, or leave it out to use the ModelRoute's own", v)
		}
	}
	if d := in.CircuitBreakerCooldown; d != nil && d.Duration < 0 {
		return bad("circuitBreakerCooldown %s is negative; set Crossplane's --circuit-breaker-cooldown, by default %s", d.Duration, DefaultCircuitBreakerCooldown)
	}
	return nil
}

// validateAnchorHeader checks the header the anchor route matches. It must
// not be the model header, matched case-insensitively as Envoy matches
// header names, or AI Gateway lists the anchor as a model and sends it
// model requests.
func (in *Input) validateAnchorHeader() error {
	h := in.AnchorHeader
	if h == nil {
		return nil
	}
	switch {
	case len(h.Name) == 0 || len(h.Name) > 256 || !HeaderName.MatchString(h.Name):
		return fmt.Errorf("anchorHeader.name %q is not an HTTP header name of 1 to 256 token characters; set one such as %s", h.Name, names.DefaultAnchorHeaderName)
	case strings.EqualFold(h.Name, names.ModelHeader):
		return fmt.Errorf("anchorHeader.name %q is the header AI Gateway routes models on; the anchor would be listed in /v1/models: set another, such as %s", h.Name, names.DefaultAnchorHeaderName)
	case len(h.Value) == 0 || len(h.Value) > 4096 || strings.ContainsFunc(h.Value, isControl):
		return fmt.Errorf("anchorHeader.value is not a header value of 1 to 4096 characters without control characters; set one such as %q", names.DefaultAnchorHeaderValue)
	}
	return nil
}

// isControl reports ASCII control characters (CR and LF among them), which
// no header value may hold (RFC 9110, field values).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
