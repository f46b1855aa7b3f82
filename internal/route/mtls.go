package route

import (
	"fmt"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/cacert"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// prefixCA, followed by the backend's name, is the copy of the backend's
// CA on the gateway cluster.
const prefixCA = "ca-"

// caKey is the key Envoy Gateway reads a CA certificate from, in a
// ConfigMap or a Secret (gateway v1.8.3 api/v1alpha1/backend_types.go,
// BackendTLSSettings.CACertificateRefs; internal/gatewayapi/
// backendtlspolicy.go, getCaCertsFromCARefs).
const caKey = "ca.crt"

// caVersionAnnotation is set on a CA Secret's copy on the gateway cluster to
// the resourceVersion of the control-plane Secret it is copied from, so a
// rotated CA reaches the gateway cluster at the next reconcile.
const caVersionAnnotation = "modelplane.ai/ca-version"

// requireCA names the requirement for a backend's CA.
func requireCA(r v1alpha1.CARef) string {
	return "ca-" + strings.ToLower(r.KindOrDefault()) + "-" + r.Name
}

// caRequirements asks for each backend's CA by kind and name in the
// ModelRoute's own namespace.
func caRequirements(spec *v1alpha1.ModelRouteSpec, ns string, out map[string]compose.Requirement) {
	for _, be := range spec.Backends {
		if r := be.CARef(); r != nil {
			out[requireCA(*r)] = compose.Requirement{APIVersion: "v1", Kind: r.KindOrDefault(), Name: r.Name, Namespace: ns}
		}
	}
}

// caState is what the function knows of one backend's CA.
type caState struct {
	// present: the ConfigMap or Secret exists with a ca.crt.
	present bool
	// version is its resourceVersion; pem the ConfigMap's ca.crt, a public
	// certificate, which the function copies itself. A Secret's is copied
	// by provider-kubernetes, and never read.
	version, pem string
	// copy is how far the Secret's copy has come.
	copy remote.CopyState
	// delivered: the copy is on the gateway cluster with the CA.
	delivered bool
	// problem names the backend and the ConfigMap or Secret.
	problem string
}

// readCA reads a backend's CA from the required resources, and how far its
// copy has come on the gateway cluster.
func readCA(req compose.Request, be v1alpha1.Backend, p placement) caState {
	r := be.CARef()
	if r == nil {
		return caState{}
	}
	var st caState
	key := prefixCA + p.key
	o, observed := req.Observed[key]
	switch r.KindOrDefault() {
	case v1alpha1.CAKindSecret:
		st.copy = remote.CopyStateIn(req.Observed, key)
		st.delivered = st.copy.Delivered
	default:
		// The ConfigMap's data is in the Object's spec from the first
		// apply on: the copy is there once the provider has created it.
		st.delivered = observed && o.Live()
	}
	items, resolved := req.Required[requireCA(*r)]
	switch {
	case !resolved:
		return st
	case len(items) == 0:
		st.problem = fmt.Sprintf("backend %q is left out of the route: its CA %s %q does not exist in the ModelRoute's namespace; create it with the backend's CA certificate under the key %q, or fix spec.backends.endpoint.tlsConfig.caRef", be.Name, r.KindOrDefault(), r.Name, caKey)
		return st
	}
	md, _ := items[0]["metadata"].(map[string]any)
	st.version, _ = md["resourceVersion"].(string)
	data, _ := items[0]["data"].(map[string]any)
	v, _ := data[caKey].(string)
	if v == "" {
		st.problem = fmt.Sprintf("backend %q is left out of the route: its CA %s %q has no key %q; put the backend's CA certificate (PEM) there", be.Name, r.KindOrDefault(), r.Name, caKey)
		return st
	}
	if r.KindOrDefault() == v1alpha1.CAKindConfigMap {
		// The function writes a ConfigMap's CA into the copy itself:
		// certificates only, parsed, so that a ca.crt that bundles a key
		// never reaches the gateway cluster or the Object's spec.
		pem, err := cacert.Certificates([]byte(v))
		if err != nil {
			st.problem = fmt.Sprintf("backend %q is left out of the route: the %q of its CA ConfigMap %q cannot be used: %v; put only the backend's CA certificates (PEM) there", be.Name, caKey, r.Name, err)
			return st
		}
		st.pem = pem
	}
	st.present = true
	return st
}

// judgeTLS records the backend's CA in bs, and reports whether the
// backend's TLS lets it be used: not when it requires the gateway's client
// certificate from a gateway without one, or its CA is missing (a Warning
// each), or not fetched yet; and whether its CA, not in the route yet
// (joined), is still on its way to the gateway cluster.
func (bs *backends) judgeTLS(req compose.Request, be v1alpha1.Backend, p placement, joined bool, gwName string, gw *gateway.RouteView) (usable, caWaiting bool) {
	ca := readCA(req, be, p)
	bs.cas[be.Name] = ca
	if w := clientCertProblem(be, gwName, gw); w != "" {
		bs.warnings = append(bs.warnings, w)
		return false, false
	}
	if ca.problem != "" {
		bs.warnings = append(bs.warnings, ca.problem)
		return false, false
	}
	if be.CARef() == nil {
		return true, false
	}
	// A CA not fetched yet: Crossplane calls again with it.
	return ca.present, !ca.delivered && !joined
}

// clientCertProblem is the Warning of a backend that requires the
// gateway's client certificate from a gateway that has none, or "".
func clientCertProblem(be v1alpha1.Backend, gwName string, gw *gateway.RouteView) string {
	if !be.WantsClientCert() || gw == nil || gw.ClientCertificate {
		return ""
	}
	return fmt.Sprintf("backend %q is left out of the route: it requires the gateway's client certificate (endpoint.tlsConfig.clientCertificate), and the InferenceGateway %q has none; set its spec.backendTLS.clientCertificate", be.Name, gwName)
}

// caCopyName names the CA's copy in the team namespace (names.BackendCA).
func (b builder) caCopyName(be v1alpha1.Backend) string { return b.places[be.Name].ca }

// caCopy is the backend's CA in the team namespace, where Envoy Gateway
// reads a Backend's caCertificateRefs (it refuses them in another
// namespace: gateway v1.8.3 internal/gatewayapi/backendtlspolicy.go,
// processServerValidationTLSSettings). A ConfigMap's certificate is public
// and written into the copy; a Secret is copied by provider-kubernetes in
// two steps, as an API key is (builder.credential).
func (b builder) caCopy(be v1alpha1.Backend, st caState) *remote.Object {
	r := be.CARef()
	if r.KindOrDefault() == v1alpha1.CAKindSecret {
		return remote.SecretCopy{
			Meta: b.meta(b.caCopyName(be)),
			Type: "Opaque",
			Name: r.Name, Namespace: b.namespace,
			Keys:    []remote.KeyCopy{{FieldPath: "data[" + caKey + "]", ToFieldPath: "data[" + caKey + "]"}},
			Version: st.version, VersionAnnotation: caVersionAnnotation,
		}.Object(b.providerConfig, st.copy.MayReference)
	}
	return b.wrap(&configMap{
		APIVersion: "v1", Kind: "ConfigMap", Metadata: b.meta(b.caCopyName(be)),
		Data: map[string]string{caKey: st.pem},
	})
}

// configMap is a ConfigMap as the function desires it.
type configMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   remote.Meta       `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
}

// backendTLS is the Backend's TLS: the backend's own CA when it names one,
// the system CAs otherwise, and SNI. The gateway's client certificate is
// not named here: Envoy Gateway v1.8.3 refuses a Backend whose
// clientCertificateRef is in another namespace, with or without a
// ReferenceGrant (internal/gatewayapi/backend.go, validateBackend), and the
// certificate lives in the gateway namespace; the gateway gives it to
// Envoy on its EnvoyProxy, for every backend that asks for one.
func (b builder) backendTLS(be v1alpha1.Backend) *egv1a1.BackendTLSSettings {
	t := &egv1a1.BackendTLSSettings{SNI: new(gwapiv1.PreciseHostname(be.Endpoint.Hostname))}
	if r := be.CARef(); r != nil {
		t.CACertificateRefs = []gwapiv1.LocalObjectReference{{Kind: gwapiv1.Kind(r.KindOrDefault()), Name: gwapiv1.ObjectName(b.caCopyName(be))}}
		return t
	}
	t.WellKnownCACertificates = new(gwapiv1.WellKnownCACertificatesSystem)
	return t
}
