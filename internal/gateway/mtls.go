package gateway

import (
	"encoding/base64"
	"fmt"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/cacert"
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/decode"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// Composition resource names of the gateway's client certificate; composed
// only with spec.backendTLS.clientCertificate, the CA copy and the Issuer
// only with its caSecretRef.
const (
	resourceClientCertificate = "client-certificate"
	resourceClientCASecret    = "client-ca-secret"
	resourceClientIssuer      = "client-issuer"
)

// requireClientCASecret names the requirement for the caSecretRef Secret.
const requireClientCASecret = "client-ca-secret"

// cert-manager's API.
var (
	certManagerAPIVersion = cmv1.SchemeGroupVersion.String()
	certManagerGroup      = cmv1.SchemeGroupVersion.Group
)

// clientCertificateSecret names the Certificate, and the Secret
// cert-manager writes it into, in the gateway namespace:
// <gateway>-client-certificate. A ModelRoute never names it: Envoy Gateway
// takes the certificate from the EnvoyProxy (envoyProxyBackendTLS).
func clientCertificateSecret(gateway string) string {
	return names.Child(gateway, "client-certificate")
}

// clientCAName names the CA Secret's copy and the CA Issuer in the gateway
// namespace.
func clientCAName(gateway string) string { return names.Child(gateway, "client-ca") }

// clientCert is what the function knows of the gateway's client
// certificate.
type clientCert struct {
	// ca is the caSecretRef Secret, nil with an issuerRef.
	ca *tlsSecret
	// caPEM is the CA's certificate (tls.crt), published in the status.
	caPEM string
	// issued: cert-manager has issued a certificate once, or the EnvoyProxy
	// already names its Secret, so Envoy may be given it.
	issued bool
	// problem holds GatewayReady while the first certificate is missing;
	// notice says a renewal is under way.
	problem, notice string
}

// clientCertRequirements asks for the caSecretRef Secret by name in the
// Input's objectNamespace on the control plane.
func (b builder) clientCertRequirements() map[string]compose.Requirement {
	c := b.spec.ClientCert()
	if c == nil || c.CASecretRef == nil {
		return nil
	}
	return map[string]compose.Requirement{requireClientCASecret: {APIVersion: "v1", Kind: "Secret", Name: c.CASecretRef.Name, Namespace: b.in.ObjectNamespace}}
}

// readClientCert reads the caSecretRef Secret from the required resources,
// as readTLSSecrets reads a TLS Secret, and the observed Certificate
// (observeCertificate). The CA's key is read only to check that it is
// there and is its certificate's; only provider-kubernetes copies it.
func (b builder) readClientCert(req compose.Request) (*clientCert, error) {
	c := b.spec.ClientCert()
	if c == nil {
		return nil, nil
	}
	out := &clientCert{}
	if r := c.CASecretRef; r != nil {
		s := &tlsSecret{name: r.Name, copy: remote.CopyStateAt(req.Observed, resourceClientCASecret, names.SecretVersionAnnotation)}
		items, resolved := req.Required[requireClientCASecret]
		switch {
		case !resolved:
		case len(items) == 0:
			s.problem = fmt.Sprintf("the CA Secret %q does not exist in %q on the control plane; create it (type kubernetes.io/tls, the CA's certificate and key) or fix spec.backendTLS.clientCertificate.caSecretRef", r.Name, b.in.ObjectNamespace)
		default:
			var data map[string]any
			var missing []string
			s.version, data, missing, _ = readTLSData(items[0])
			if len(missing) > 0 {
				s.problem = fmt.Sprintf("the CA Secret %q in %q on the control plane lacks tls.crt or tls.key; cert-manager's CA issuer needs both", r.Name, b.in.ObjectNamespace)
				break
			}
			pem, problem := readCAPair(data)
			if problem != "" {
				s.problem = fmt.Sprintf("the CA Secret %q in %q on the control plane %s", r.Name, b.in.ObjectNamespace, problem)
				break
			}
			s.present = true
			out.caPEM = pem
		}
		out.ca = s
	}
	return out, b.observeCertificate(req.Observed, out, req.Now)
}

// readCAPair reads a CA Secret's pair: the certificates of tls.crt, which
// the status publishes, and whether tls.key is their key. It never returns
// or quotes anything else of either: a tls.crt that bundles the key, or a
// Secret whose two entries are swapped, would otherwise publish the CA's
// private key to everyone who may read the InferenceGateway. problem, if
// any, says what is wrong and how to fix it, after "the CA Secret ...".
func readCAPair(data map[string]any) (certs, problem string) {
	crt, okCrt := base64Entry(data, corev1.TLSCertKey)
	key, okKey := base64Entry(data, corev1.TLSPrivateKeyKey)
	if !okCrt || !okKey {
		return "", "holds a tls.crt or tls.key that is not base64; recreate it with kubectl create secret tls"
	}
	certs, err := cacert.Certificates(crt)
	if err != nil {
		return "", fmt.Sprintf("cannot be used: in tls.crt, %v; put only the CA's certificate (PEM) in tls.crt and its private key in tls.key", err)
	}
	if err := cacert.MatchesKey(certs, key); err != nil {
		return "", "holds a tls.key that is not the key of the certificate in tls.crt; put the CA's own key in tls.key"
	}
	return certs, ""
}

// base64Entry decodes a Secret's data entry.
func base64Entry(data map[string]any, key string) ([]byte, bool) {
	v, _ := data[key].(string)
	b, err := base64.StdEncoding.DecodeString(v)
	return b, err == nil
}

// certificateStatus is the part of a cert-manager Certificate's status the
// function reads.
type certificateStatus struct {
	Conditions []cmv1.CertificateCondition `json:"conditions,omitempty"`
	NotAfter   *metav1.Time                `json:"notAfter,omitempty"`
	Revision   *int                        `json:"revision,omitempty"`
}

// observeCertificate judges the Certificate. cert-manager sets Ready=True
// once the Secret holds a certificate that is valid and matches the spec
// (cert-manager v1.21.2 pkg/controller/certificates/readiness), and
// status.revision each time it writes one into the Secret
// (pkg/controller/certificates/issuing, issueCertificate). A Certificate
// that has been issued and has not expired serves while it renews: the
// Secret keeps the certificate issued before until issueCertificate
// replaces it. Envoy Gateway gives Envoy the client certificate as an SDS
// secret over its xDS stream (gateway v1.8.3 internal/xds/translator/
// translator.go, buildXdsUpstreamTLSSocketWthCert), so a renewed one
// replaces it without touching the clusters or the pods.
func (b builder) observeCertificate(obs map[string]remote.Observed, out *clientCert, now time.Time) error {
	name := clientCertificateSecret(b.in.GatewayName)
	// Once the EnvoyProxy names the Secret it keeps naming it: taking it
	// away would make every backend that requires it fail.
	if ep, ok := obs[resourceEnvoyProxy]; ok {
		ref, _, _ := unstructured.NestedString(ep.Applied(), "spec", "backendTLS", "clientCertificateRef", "name")
		out.issued = ref == name
	}
	o, ok := obs[resourceClientCertificate]
	if !ok || !o.Live() {
		if !out.issued {
			out.problem = fmt.Sprintf("the client Certificate %q has not been observed on the gateway cluster yet%s; cert-manager must be installed there", name, remote.SyncNote(o, ok))
		}
		return nil
	}
	st := certificateStatus{}
	if err := decode.Into("the observed Certificate", "status", o.Manifest()["status"], &st); err != nil {
		return errors.Wrapf(err, "cannot read the observed Certificate %q", name)
	}
	ready := readyCondition(st.Conditions)
	issuedOnce := st.Revision != nil && *st.Revision > 0
	serving := issuedOnce && st.NotAfter != nil && st.NotAfter.After(now)
	switch {
	case ready != nil && ready.Status == cmmeta.ConditionTrue:
		out.issued = true
	case serving:
		out.issued = true
		out.notice = fmt.Sprintf("cert-manager is renewing the client Certificate %q (%s); Envoy presents the certificate issued before, valid until %s, until the new one is in its Secret", name, quoteCondition(ready), st.NotAfter.UTC().Format(time.RFC3339))
	default:
		// Expired, or never issued. An EnvoyProxy that names the Secret
		// keeps naming it (issued stays as read above): the Secret is
		// still there, and cert-manager renews into it.
		out.problem = fmt.Sprintf("cert-manager has not issued the client Certificate %q yet (%s)", name, quoteCondition(ready))
		if issuedOnce {
			out.problem = fmt.Sprintf("the client Certificate %q has expired and cert-manager has not renewed it (%s)", name, quoteCondition(ready))
		}
	}
	return nil
}

// readyCondition is the Certificate's Ready condition, or nil.
func readyCondition(conds []cmv1.CertificateCondition) *cmv1.CertificateCondition {
	for i := range conds {
		if conds[i].Type == cmv1.CertificateConditionReady {
			return &conds[i]
		}
	}
	return nil
}

// quoteCondition spells cert-manager's Ready condition.
func quoteCondition(c *cmv1.CertificateCondition) string {
	if c == nil {
		return "no Ready condition yet"
	}
	s := fmt.Sprintf("Ready=%s, %s", c.Status, c.Reason)
	if c.Message != "" {
		s += `: "` + c.Message + `"`
	}
	return s
}

// composeClientCert adds the Certificate and, with a caSecretRef, the CA's
// copy and its Issuer. A CA Secret missing on the control plane is not
// built: the copy composed before, if any, is carried forward (it is
// implied), so cert-manager can still sign with it.
func (b builder) composeClientCert(c *clientCert, obs map[string]remote.Observed, res map[string]compose.Desired) {
	if c == nil {
		return
	}
	spec := b.spec.ClientCert()
	res[resourceClientCertificate] = compose.Desired{Object: b.certificate(spec), Ready: c.issued && c.problem == ""}
	if c.ca == nil {
		return
	}
	if c.ca.present {
		res[resourceClientCASecret] = compose.Desired{Object: b.clientCASecret(*c.ca), Ready: c.ca.serving()}
	}
	res[resourceClientIssuer] = compose.Desired{Object: b.clientIssuer(), Ready: remote.ReadyIn(obs, resourceClientIssuer) || c.issued}
}

// certificate is the gateway's client certificate. An ECDSA key, rotated
// with every renewal, for client authentication only.
func (b builder) certificate(c *v1alpha1.ClientCertificate) *remote.Object {
	d, r, _ := c.Durations()
	ref := cmmeta.IssuerReference{Group: certManagerGroup, Kind: v1alpha1.KindIssuer}
	switch {
	case c.IssuerRef != nil:
		ref.Name = c.IssuerRef.Name
		if c.IssuerRef.Kind != "" {
			ref.Kind = c.IssuerRef.Kind
		}
	default:
		ref.Name = clientCAName(b.in.GatewayName)
	}
	name := clientCertificateSecret(b.in.GatewayName)
	spec := &cmv1.CertificateSpec{
		CommonName:  b.in.GatewayName,
		Duration:    &metav1.Duration{Duration: d},
		RenewBefore: &metav1.Duration{Duration: r},
		SecretName:  name,
		IssuerRef:   ref,
		Usages:      []cmv1.KeyUsage{cmv1.UsageClientAuth, cmv1.UsageDigitalSignature},
		PrivateKey: &cmv1.CertificatePrivateKey{
			Algorithm:      cmv1.ECDSAKeyAlgorithm,
			Size:           256,
			RotationPolicy: cmv1.RotationPolicyAlways,
		},
	}
	if b.spec.Hostname != "" {
		spec.DNSNames = []string{b.spec.Hostname}
	}
	// Watched, so that cert-manager's verdict reaches GatewayReady within
	// a watch event.
	return b.wrap(&remote.Manifest[cmv1.CertificateSpec]{
		APIVersion: certManagerAPIVersion,
		Kind:       cmv1.CertificateKind,
		Metadata:   b.meta(name),
		Spec:       spec,
	}, remote.Watch())
}

// clientCASecret is the caSecretRef Secret's copy in the gateway namespace,
// made by provider-kubernetes in two steps as a TLS Secret's
// (tlsSecretObject).
func (b builder) clientCASecret(s tlsSecret) *remote.Object {
	return b.tlsSecretCopy(s, clientCAName(b.in.GatewayName))
}

// celIssuerReady holds once a cert-manager issuer's Ready condition is True.
const celIssuerReady = "has(object.status) && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"

// clientIssuer is the CA Issuer that signs with the copied CA Secret
// (cert-manager v1.21.2 pkg/apis/certmanager/v1/types_issuer.go, CAIssuer:
// the Secret is read from the Issuer's namespace).
func (b builder) clientIssuer() *remote.Object {
	return b.wrap(&remote.Manifest[cmv1.IssuerSpec]{
		APIVersion: certManagerAPIVersion,
		Kind:       cmv1.IssuerKind,
		Metadata:   b.meta(clientCAName(b.in.GatewayName)),
		Spec: &cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{
			CA: &cmv1.CAIssuer{SecretName: clientCAName(b.in.GatewayName)},
		}},
	}, remote.ReadyWhen(celIssuerReady))
}

// envoyProxyBackendTLS is the EnvoyProxy's backendTLS once the first
// client certificate is issued: Envoy presents it to every backend that
// asks for one. It is set on the EnvoyProxy, not on each Backend, because
// Envoy Gateway v1.8.3 refuses a Backend whose clientCertificateRef is in
// another namespace, ReferenceGrant or not (internal/gatewayapi/backend.go,
// validateBackend), and the Backends live in team namespaces; it merges
// the EnvoyProxy's backendTLS into every Backend with TLS settings
// (internal/gatewayapi/backendtlspolicy.go, applyBackendTLSSetting;
// contexts.go, GetBackendTLSConfig). It is left out until the Secret
// exists: while the EnvoyProxy names a Secret it cannot find, Envoy
// Gateway fails every TLS backend of the gateway (processClientTLSSettings).
func (b builder) envoyProxyBackendTLS(c *clientCert) *egv1a1.BackendTLSConfig {
	if c == nil || !c.issued {
		return nil
	}
	return &egv1a1.BackendTLSConfig{
		ClientCertificateRef: &gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(clientCertificateSecret(b.in.GatewayName))},
	}
}

// backendTLSStatus publishes the client certificate's Secret and, with a
// caSecretRef, the CA's certificate (public).
func (b builder) backendTLSStatus(c *clientCert) *v1alpha1.BackendTLSStatus {
	if c == nil {
		return nil
	}
	return &v1alpha1.BackendTLSStatus{CACertificate: c.caPEM, SecretName: clientCertificateSecret(b.in.GatewayName)}
}
