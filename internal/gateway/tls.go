package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// requireTLSSecretPrefix, followed by the Secret's name, names the
// requirement for a TLS Secret on the control plane.
const requireTLSSecretPrefix = "tls-secret-"

// tlsSecret is what the function knows of one certificateRef's Secret.
type tlsSecret struct {
	name string
	// present: the control-plane Secret exists with both keys.
	present bool
	// version is its resourceVersion.
	version string
	// problem says what is wrong with it, for TLSSecretMissing.
	problem string
	copy    remote.CopyState
}

// secretRequirements asks for the control-plane Secrets the gateway's TLS
// and client certificate are copied from.
func (b builder) secretRequirements() map[string]compose.Requirement {
	out := b.tlsRequirements()
	maps.Copy(out, b.clientCertRequirements())
	return out
}

// tlsRequirements asks for each certificateRef's Secret by name in the
// Input's objectNamespace on the control plane.
func (b builder) tlsRequirements() map[string]compose.Requirement {
	out := map[string]compose.Requirement{}
	if !b.spec.TLSEnabled() {
		return out
	}
	for _, r := range b.spec.TLS.CertificateRefs {
		out[requireTLSSecretPrefix+r.Name] = compose.Requirement{APIVersion: "v1", Kind: "Secret", Name: r.Name, Namespace: b.in.ObjectNamespace}
	}
	return out
}

// readTLSSecrets reads each certificateRef's Secret from the required
// resources: whether tls.crt and tls.key are there, and whether the key is
// the certificate's (keyMismatch). The values are read for that check only;
// they never leave the function, and only provider-kubernetes copies them.
func (b builder) readTLSSecrets(req compose.Request) []tlsSecret {
	if !b.spec.TLSEnabled() {
		return nil
	}
	out := make([]tlsSecret, 0, len(b.spec.TLS.CertificateRefs))
	for _, r := range b.spec.TLS.CertificateRefs {
		s := tlsSecret{name: r.Name, copy: remote.CopyStateAt(req.Observed, ResourceTLSSecretPrefix+r.Name, names.SecretVersionAnnotation)}
		items, resolved := req.Required[requireTLSSecretPrefix+r.Name]
		switch {
		case !resolved:
			// Not fetched yet: Crossplane calls again with it.
		case len(items) == 0:
			s.problem = fmt.Sprintf("the TLS Secret %q does not exist in %q on the control plane; create it (type kubernetes.io/tls) or fix spec.tls.certificateRefs", r.Name, b.in.ObjectNamespace)
		default:
			var missing []string
			var mismatch bool
			s.version, _, missing, mismatch = readTLSData(items[0])
			switch {
			case len(missing) > 0:
				s.problem = fmt.Sprintf("the TLS Secret %q in %q on the control plane has no %s; add the certificate and key", r.Name, b.in.ObjectNamespace, strings.Join(missing, " or "))
			case mismatch:
				s.problem = fmt.Sprintf("the TLS Secret %q in %q on the control plane holds a tls.key that is not the key of the certificate in tls.crt; copied, it would take the https listener down (Envoy Gateway, or Envoy, refuses the pair), so it is not copied to the gateway cluster and the copy delivered before keeps serving: put the certificate's own key in tls.key", r.Name, b.in.ObjectNamespace)
			default:
				s.present = true
			}
		}
		out = append(out, s)
	}
	return out
}

// keyMismatch reports whether a TLS Secret's data holds a certificate and a
// private key that both parse but do not belong together. Such a pair
// takes the https listener down once it is copied: Envoy Gateway v1.8.3
// refuses it (internal/gatewayapi/tls.go, parseCertsFromTLSSecretsData,
// "must contain a matching tls.crt and tls.key"), and v1.8.1 and v1.8.2,
// which never compared the two, programmed a pair Envoy then refused. So
// the function judges it before copying, and keeps the copy delivered
// before, which goes on serving. A certificate or key that does not parse
// is Envoy Gateway's to reject (InvalidCertificateRef, which
// ListenersNotProgrammed reports with its words), so it is not judged here.
func keyMismatch(data map[string]any) bool {
	decode := func(k string) []byte {
		v, _ := data[k].(string)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil
		}
		return b
	}
	crtPEM, keyPEM := decode(corev1.TLSCertKey), decode(corev1.TLSPrivateKeyKey)
	if !parses(crtPEM, keyPEM) {
		return false
	}
	_, err := tls.X509KeyPair(crtPEM, keyPEM)
	return err != nil
}

// parses reports whether the first PEM block of crtPEM is a certificate and
// the first of keyPEM a private key, in the formats Envoy Gateway accepts
// (PKCS#1, PKCS#8, SEC 1).
func parses(crtPEM, keyPEM []byte) bool {
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return false
	}
	if _, err := x509.ParseCertificate(cb.Bytes); err != nil {
		return false
	}
	switch kb.Type {
	case "PRIVATE KEY":
		_, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		return err == nil
	case "RSA PRIVATE KEY":
		_, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
		return err == nil
	case "EC PRIVATE KEY":
		_, err := x509.ParseECPrivateKey(kb.Bytes)
		return err == nil
	}
	return false
}

// serving reports whether the gateway cluster has a copy of the Secret
// with its values: the Object's current spec is delivered, or an earlier
// version was (the live copy carries a version annotation).
func (s tlsSecret) serving() bool { return s.copy.Delivered || s.copy.LiveVersion != "" }

// renewing reports whether a version of the Secret newer than the one on
// the gateway cluster is on its way there.
func (s tlsSecret) renewing() bool {
	return !s.copy.Delivered && s.copy.LiveVersion != "" && s.copy.LiveVersion != s.version
}

// readTLSData reads a required kubernetes.io/tls Secret: its
// resourceVersion, its data, which of tls.crt and tls.key it lacks, and
// whether tls.key is not the key of tls.crt (keyMismatch).
func readTLSData(item map[string]any) (version string, data map[string]any, missing []string, mismatch bool) {
	md, _ := item["metadata"].(map[string]any)
	version, _ = md["resourceVersion"].(string)
	data, _ = item["data"].(map[string]any)
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if v, _ := data[k].(string); v == "" {
			missing = append(missing, k)
		}
	}
	return version, data, missing, len(missing) == 0 && keyMismatch(data)
}

// tlsSecretObject is the certificateRef's kubernetes.io/tls Secret in the
// gateway namespace, copied from the control plane by provider-kubernetes
// in two steps (remote.SecretCopy). A kubernetes.io/tls Secret must have
// both keys from its creation, empty or not (kubernetes
// pkg/apis/core/validation/validation.go, ValidateSecret), and its type is
// immutable, so the first step creates it with empty values.
func (b builder) tlsSecretObject(s tlsSecret) *remote.Object {
	return b.tlsSecretCopy(s, s.name)
}

// tlsSecretCopy copies the kubernetes.io/tls Secret s from the control
// plane into the gateway namespace under the name copyName.
func (b builder) tlsSecretCopy(s tlsSecret, copyName string) *remote.Object {
	return remote.SecretCopy{
		Meta:         b.meta(copyName),
		Type:         string(corev1.SecretTypeTLS),
		Placeholders: []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
		Name:         s.name, Namespace: b.in.ObjectNamespace,
		// Brackets, because the keys hold dots.
		Keys: []remote.KeyCopy{
			{FieldPath: "data[" + corev1.TLSCertKey + "]", ToFieldPath: "data[" + corev1.TLSCertKey + "]"},
			{FieldPath: "data[" + corev1.TLSPrivateKeyKey + "]", ToFieldPath: "data[" + corev1.TLSPrivateKeyKey + "]"},
		},
		Version: s.version, VersionAnnotation: names.SecretVersionAnnotation,
	}.Object(b.spec.ProviderConfigName, s.copy.MayReference, remote.InNamespace(b.in.ObjectNamespace))
}

// checkTLSNames refuses a certificateRef whose copy in the gateway
// namespace would have the name of a Secret the function composes there
// for itself: the two Objects would write one Secret, and either the
// listener would serve a CA's or a caller's keys, or the caller policy or
// cert-manager would read a TLS pair. The function's own names there are
// the client certificate's (written by cert-manager), its CA's copy, and
// every caller Secret's copy, whose names all start with the caller
// policy's name: that prefix is reserved whole, so that a caller Secret
// selected later cannot collide either.
func (b builder) checkTLSNames(c callers) error {
	if !b.spec.TLSEnabled() {
		return nil
	}
	gw := b.in.GatewayName
	own := map[string]string{
		clientCAName(gw):            "the copy of the client certificate's CA",
		clientCertificateSecret(gw): "the Secret cert-manager writes the gateway's client certificate into",
	}
	for _, s := range c.selected {
		own[s.remoteName] = fmt.Sprintf("the copy of the callers' Secret %q", s.name)
	}
	prefix := names.CallerPolicy(gw) + "-"
	for i, r := range b.spec.TLS.CertificateRefs {
		what, taken := own[r.Name]
		if !taken && strings.HasPrefix(r.Name, prefix) {
			taken, what = true, fmt.Sprintf("in the form %s<Secret> of the callers' Secrets' copies", prefix)
		}
		if taken {
			return errors.Errorf("cannot compose InferenceGateway: spec.tls.certificateRefs[%d].name %q is a name the function uses for its own Secrets in the gateway namespace %q (%s); copy the certificate into a Secret of another name and name that one", i, r.Name, b.in.GatewayNamespace, what)
		}
	}
	return nil
}
