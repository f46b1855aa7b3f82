package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

const (
	// tlsHostname is the gateway's spec.hostname with TLS, the name the
	// certificates are for.
	tlsHostname = "llm.example.com"
	// tlsSecretName is the spec.tls.certificateRefs entry: a
	// kubernetes.io/tls Secret in the Input's objectNamespace on the
	// control plane, copied under the same name into the gateway namespace.
	tlsSecretName = "llm-example-com-tls"
)

// tlsCert is a certificate for tlsHostname and its key, PEM-encoded.
type tlsCert struct {
	harness.KeyPair
	serial *big.Int
}

// selfSigned makes a self-signed serving certificate for host, valid from
// notBefore to notAfter, with a key of its own.
func selfSigned(tb testing.TB, host string, notBefore, notAfter time.Time) tlsCert {
	tb.Helper()
	key := harness.NewKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          harness.Serial(tb),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("cannot create a self-signed certificate for %s: %v", host, err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("cannot encode the key for %s: %v", host, err)
	}
	return tlsCert{
		KeyPair: harness.KeyPair{
			CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		},
		serial: tmpl.SerialNumber,
	}
}

// data is the certificate as a kubernetes.io/tls Secret's data.
func (c tlsCert) data() map[string]any {
	return map[string]any{
		"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM),
		"tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM),
	}
}

// putTLSSecret creates the control-plane TLS Secret with c, or replaces its
// certificate and key. Its key becomes a value no Object, XR or xDS dump
// may hold.
func (sc *scenarios) putTLSSecret(t *testing.T, what string, c tlsCert) {
	t.Helper()
	sc.w.Forbid("the private key of the "+what+" TLS certificate", base64.StdEncoding.EncodeToString(c.KeyPEM))
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": tlsSecretName, "namespace": harness.ObjectNS},
		"type":     "kubernetes.io/tls",
		"data":     c.data(),
	}}
	cur, err := sc.get(sc.ctx, harness.GVRSecret, harness.ObjectNS, tlsSecretName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Create(sc.ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.SetResourceVersion(cur.GetResourceVersion())
		_, err = sc.c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Update(sc.ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("cannot write the TLS Secret %s/%s: %v", harness.ObjectNS, tlsSecretName, err)
	}
}

// listenerStatus returns the conditions Envoy Gateway reported for a
// listener of our Gateway, as "Type=Status (Reason)" by type, with the
// messages, and whether the Gateway's spec has that listener.
func (sc *scenarios) listenerStatus(ctx context.Context, listener string) (conds map[string]string, messages map[string]string, inSpec bool) {
	gw, err := sc.get(ctx, harness.GVRGateway, harness.GatewayNS, harness.GatewayXRName)
	if err != nil {
		return nil, nil, false
	}
	ls, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	inSpec = slices.ContainsFunc(ls, func(l any) bool { m, _ := l.(map[string]any); return m["name"] == listener })
	conds, messages = map[string]string{}, map[string]string{}
	st, _, _ := unstructured.NestedSlice(gw.Object, "status", "listeners")
	for _, x := range st {
		l, _ := x.(map[string]any)
		if l["name"] != listener {
			continue
		}
		cs, _ := l["conditions"].([]any)
		for _, y := range cs {
			c, _ := y.(map[string]any)
			typ, _ := c["type"].(string)
			if og, _ := c["observedGeneration"].(int64); og < gw.GetGeneration() {
				conds[typ] = fmt.Sprintf("stale (generation %d of %d)", og, gw.GetGeneration())
				continue
			}
			conds[typ] = fmt.Sprintf("%v (%v)", c["status"], c["reason"])
			messages[typ], _ = c["message"].(string)
		}
	}
	return conds, messages, inSpec
}

// copyHoldsCert returns "" when the gateway cluster's copy of the TLS
// Secret holds the certificate c.
func (sc *scenarios) copyHoldsCert(ctx context.Context, c tlsCert) string {
	cp, err := sc.get(ctx, harness.GVRSecret, harness.GatewayNS, tlsSecretName)
	if err != nil {
		return err.Error()
	}
	if v, _, _ := unstructured.NestedString(cp.Object, "data", "tls.crt"); v != base64.StdEncoding.EncodeToString(c.CertPEM) {
		return fmt.Sprintf("the copy %s/%s holds another certificate than the one of serial %s", harness.GatewayNS, tlsSecretName, c.serial)
	}
	return ""
}

// gatewayServesTLS returns "" once GatewayReady is True and Envoy Gateway
// has programmed the https listener, with its certificate resolved, for
// the Gateway's current generation.
func (sc *scenarios) gatewayServesTLS(ctx context.Context) string {
	if w := wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True"); w != "" {
		return w
	}
	conds, _, inSpec := sc.listenerStatus(ctx, gateway.ListenerHTTPS)
	if !inSpec {
		return "the Gateway has no https listener"
	}
	if conds["Programmed"] != "True (Programmed)" || conds["ResolvedRefs"] != "True (ResolvedRefs)" {
		return fmt.Sprintf("the https listener: %v", conds)
	}
	return ""
}

// listenerNamed returns our Gateway's xDS listener for a Gateway listener.
func (d xdsDump) listenerNamed(listener string) map[string]any {
	for _, l := range d.gatewayListeners() {
		if l["name"] == harness.GatewayNS+"/"+harness.GatewayXRName+"/"+listener {
			return l
		}
	}
	return nil
}

// routeConfig returns the route configuration of a Gateway listener, named
// like its listener by Envoy Gateway.
func (d xdsDump) routeConfig(listener string) map[string]any {
	for _, rc := range d["routes"] {
		if rc["name"] == harness.GatewayNS+"/"+harness.GatewayXRName+"/"+listener {
			return rc
		}
	}
	return nil
}

// checkFrontDoorTLS: /healthz is a direct response 200 on the http and the
// https listener, and every other route of the http listener redirects to
// https on host with a 308 (PERMANENT_REDIRECT; gateway v1.8.3
// internal/xds/translator/route.go, buildXdsRedirectAction).
func checkFrontDoorTLS(host string) func(xdsDump) string {
	return func(d xdsDump) string {
		for _, listener := range []string{gateway.ListenerHTTP, gateway.ListenerHTTPS} {
			rc := d.routeConfig(listener)
			if rc == nil {
				return fmt.Sprintf("no route configuration for the %s listener", listener)
			}
			health, others := 0, 0
			vhs, _ := rc["virtual_hosts"].([]any)
			for _, vh := range vhs {
				routes, _ := vh.(map[string]any)["routes"].([]any)
				for _, x := range routes {
					r, _ := x.(map[string]any)
					if p, _, _ := unstructured.NestedString(r, "match", "path"); p == names.HealthPath {
						if s, _, _ := unstructured.NestedFieldNoCopy(r, "direct_response", "status"); s != float64(200) {
							return fmt.Sprintf("%s on the %s listener is not a direct response 200: %v", names.HealthPath, listener, r)
						}
						health++
						continue
					}
					others++
					if listener != gateway.ListenerHTTP {
						continue
					}
					red, _ := r["redirect"].(map[string]any)
					if red == nil || red["response_code"] != "PERMANENT_REDIRECT" || red["scheme_redirect"] != "https" || red["host_redirect"] != host {
						return fmt.Sprintf("route %v of the http listener is not a 308 to https://%s: %v", r["name"], host, r)
					}
				}
			}
			if health == 0 {
				return fmt.Sprintf("no %s route on the %s listener", names.HealthPath, listener)
			}
			if listener == gateway.ListenerHTTP && others == 0 {
				return "the http listener has no redirect"
			}
		}
		return ""
	}
}

// checkRouteOn: the model's route is in the route configuration of the
// listener.
func checkRouteOn(model, listener string) func(xdsDump) string {
	return func(d xdsDump) string {
		if r, rc := d.modelRoute(model); r == nil || rc != harness.GatewayNS+"/"+harness.GatewayXRName+"/"+listener {
			return fmt.Sprintf("the route of %q is in the route configuration %q, want the %s listener's", model, rc, listener)
		}
		return ""
	}
}

// GatewayFalse waits until GatewayReady is False with reason and a message
// that contains want, and logs how long that took after what was written.
func (sc *scenarios) gatewayFalse(t *testing.T, written, reason, want string) {
	t.Helper()
	start := time.Now()
	var got string
	sc.eventually(t, waitRoute, fmt.Sprintf("GatewayReady=False, %s, after %s", reason, written), func(ctx context.Context) string {
		gw := sc.gatewayXR(ctx)
		if s := wantCondition(gw, gateway.ConditionType, "False"); s != "" {
			return s
		}
		msg := conditionMessage2(gw, gateway.ConditionType)
		if r := harness.ConditionReason(gw, gateway.ConditionType); r != reason || !strings.Contains(msg, want) {
			return fmt.Sprintf("GatewayReady False (%s): %s", r, msg)
		}
		got = msg
		return ""
	})
	t.Logf("GatewayReady=False %s after %s was written: %s", time.Since(start).Round(100*time.Millisecond), written, got)
}
