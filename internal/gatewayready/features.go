package gatewayready

import (
	"fmt"
	"strings"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// The checks of the gateway's Secret-fed features: TLS, the client
// certificate to backends, and caller authentication. Package gateway
// reads the Secrets on the control plane and their copies' delivery
// (tls.go, mtls.go, callers.go); these checks judge what it read.

// Secret is what package gateway read of one control-plane Secret that
// provider-kubernetes copies to the gateway cluster.
type Secret struct {
	// Name is the Secret's name on the control plane.
	Name string
	// Problem says what is wrong with it on the control plane; empty if
	// nothing is.
	Problem string
	// Present: the Secret was fetched from the control plane with its
	// keys.
	Present bool
	// Serving: a copy with its values is on the gateway cluster, this
	// version or one delivered before.
	Serving bool
	// Renewing: a version newer than the gateway cluster's copy is on its
	// way there.
	Renewing bool
	// Version is the control-plane Secret's resourceVersion, LiveVersion
	// that of the copy on the gateway cluster.
	Version, LiveVersion string
}

// missing says why the Secret, named as what ("TLS", "CA"), is not yet
// usable on the gateway cluster; empty if it is.
func (s Secret) missing(what string) string {
	switch {
	case s.Problem != "":
		return s.Problem
	case !s.Present:
		return fmt.Sprintf("the %s Secret %q has not been fetched from the control plane yet", what, s.Name)
	case !s.Serving:
		return fmt.Sprintf("the %s Secret %q has not reached the gateway cluster yet; provider-kubernetes copies it from the control plane", what, s.Name)
	}
	return ""
}

// ClientCert is what package gateway read of the gateway's client
// certificate: the CA Secret, and the Certificate as cert-manager reports
// it.
type ClientCert struct {
	// CA is the caSecretRef Secret; nil with an issuerRef.
	CA *Secret
	// Issued: cert-manager has issued a certificate once, or the
	// EnvoyProxy already names its Secret, so Envoy may be given it.
	Issued bool
	// Problem holds GatewayReady while the first certificate is missing;
	// Notice says a renewal is under way.
	Problem, Notice string
}

// Callers is what package gateway read of the caller Secrets that
// spec.auth.apiKey.secretSelector selects.
type Callers struct {
	// Resolved: Crossplane has fetched the selection.
	Resolved bool
	// Selector is the selector's labels, key=value, sorted.
	Selector []string
	// Selected are the selected Secrets.
	Selected []Caller
	// Notes are mistakes that do not stop a Secret from being used:
	// Warnings.
	Notes []string
	// Waits say which Secret waits for what: Normal results.
	Waits []string
}

// Caller is one selected caller Secret.
type Caller struct {
	// Name is the Secret's name on the control plane.
	Name string
	// Problem says why Envoy Gateway could not use it; empty if it can.
	Problem string
	// InUse: the caller-auth SecurityPolicy references its copy.
	InUse bool
}

// observeTLS adds TLSSecretMissing for each TLS Secret that is missing,
// incomplete or holds the key of another certificate on the control plane,
// or has never reached the gateway cluster: the https listener cannot
// terminate TLS without it. A renewal on its way (a new version of a
// Secret whose copy was delivered before) holds nothing: the https
// listener serves the version delivered before until the new one arrives,
// so it is only a Normal notice.
func (e *Evidence) observeTLS(secrets []Secret) {
	for _, s := range secrets {
		switch why := s.missing("TLS"); {
		case why != "":
			e.Problems.Add(ReasonTLSSecretMissing, why)
		case s.Renewing:
			e.Notices = append(e.Notices, fmt.Sprintf("a new version of the TLS Secret %q (resourceVersion %s) is being delivered to the gateway cluster; the https listener serves the version delivered before (resourceVersion %s) until it arrives", s.Name, s.Version, s.LiveVersion))
		}
	}
}

// observeClientCert adds ClientCertificateNotReady while the first
// certificate is not issued: a backend that requires it cannot be reached.
// A CA Secret that goes missing afterwards holds nothing (the certificate
// issued serves), but its renewal will fail: a Warning says so.
func (e *Evidence) observeClientCert(c *ClientCert) {
	if c == nil {
		return
	}
	if s := c.CA; s != nil {
		switch why := s.missing("CA"); {
		case why != "" && !c.Issued:
			e.Problems.Add(ReasonClientCertificateNotReady, why)
			return
		case s.Problem != "":
			e.ClientCertWarnings = append(e.ClientCertWarnings, s.Problem+"; the client certificate issued before serves, but cert-manager cannot renew it")
		}
	}
	if c.Problem != "" {
		e.Problems.Add(ReasonClientCertificateNotReady, c.Problem)
	}
	if c.Notice != "" {
		e.Notices = append(e.Notices, c.Notice)
	}
}

// observeCallers requires, with caller authentication, a usable caller
// Secret and Envoy Gateway's acceptance of the SecurityPolicy. Problems of
// single Secrets that leave others in use are warnings, not readiness
// failures.
func (g Gateway) observeCallers(c *Callers) func(*Evidence, map[string]remote.Observed) error {
	return func(e *Evidence, obs map[string]remote.Observed) error {
		if c == nil {
			return nil
		}
		inUse := false
		for _, s := range c.Selected {
			if s.Problem != "" {
				e.AuthWarnings = append(e.AuthWarnings, s.Problem)
			}
			inUse = inUse || s.InUse
		}
		e.AuthWarnings = append(e.AuthWarnings, c.Notes...)
		e.Notices = append(e.Notices, c.Waits...)
		if !c.Resolved {
			e.Problems.Add(ReasonCallerAuthNotAccepted, "Crossplane has not fetched the caller Secrets that spec.auth.apiKey.secretSelector selects yet")
			return nil
		}
		if !inUse {
			g.noCallers(e, c)
		}
		var err error
		e.CallerPolicyAccepted, err = g.policyAccepted(e, obs, g.Resources.CallerAuth, ReasonCallerAuthNotAccepted,
			"caller-auth SecurityPolicy", names.CallerPolicy(g.In.GatewayName), "; while it is rejected, Envoy answers 500 to every model request")
		return err
	}
}

// noCallers explains why no caller can get through.
func (g Gateway) noCallers(e *Evidence, c *Callers) {
	labels := strings.Join(c.Selector, ",")
	deny := "the gateway denies every model request until one is"
	var delivering []string
	for _, s := range c.Selected {
		if s.Problem == "" && !s.InUse {
			delivering = append(delivering, s.Name)
		}
	}
	switch {
	case len(c.Selected) == 0:
		e.Problems.Add(ReasonCallerSecretsMissing, fmt.Sprintf("spec.auth.apiKey.secretSelector (%s) selects no Secret in the namespace %q; %s: create a Secret there with those labels and one entry per caller (client ID: API key)", labels, g.In.ObjectNamespace, deny))
	case len(delivering) == 0:
		e.Problems.Add(ReasonCallerSecretsMissing, fmt.Sprintf("none of the caller Secrets that spec.auth.apiKey.secretSelector (%s) selects can be used; %s: %s", labels, deny, strings.Join(e.AuthWarnings, "; ")))
	default:
		e.Problems.Add(ReasonCallerAuthNotAccepted, fmt.Sprintf("the caller Secrets %s are being copied to the gateway cluster; %s", compose.QuoteAll(delivering), deny))
	}
}
