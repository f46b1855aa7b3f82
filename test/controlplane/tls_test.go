package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/modelplaneai/function-inference-gateway/internal/apis/v1alpha1"
	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/gatewayready"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
)

// The TLS scenario: the InferenceGateway terminates TLS with a real
// self-signed certificate, Envoy Gateway rejects a bad one, and a renewal
// never makes the gateway or its routes say False.

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
	keyPair
	serial *big.Int
}

// selfSigned makes a self-signed serving certificate for host, valid from
// notBefore to notAfter, with a key of its own.
func selfSigned(tb testing.TB, host string, notBefore, notAfter time.Time) tlsCert {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
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
		keyPair: keyPair{
			certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		},
		serial: tmpl.SerialNumber,
	}
}

// data is the certificate as a kubernetes.io/tls Secret's data.
func (c tlsCert) data() map[string]any {
	return map[string]any{
		"tls.crt": base64.StdEncoding.EncodeToString(c.certPEM),
		"tls.key": base64.StdEncoding.EncodeToString(c.keyPEM),
	}
}

// putTLSSecret creates the control-plane TLS Secret with c, or replaces its
// certificate and key. Its key becomes a value no Object, XR or xDS dump
// may hold.
func (sc *scenarios) putTLSSecret(t *testing.T, what string, c tlsCert) {
	t.Helper()
	sc.w.forbid("the private key of the "+what+" TLS certificate", base64.StdEncoding.EncodeToString(c.keyPEM))
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": tlsSecretName, "namespace": objectNS},
		"type":     "kubernetes.io/tls",
		"data":     c.data(),
	}}
	cur, err := sc.get(sc.ctx, gvrSecret, objectNS, tlsSecretName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = sc.c.dyn.Resource(gvrSecret).Namespace(objectNS).Create(sc.ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.SetResourceVersion(cur.GetResourceVersion())
		_, err = sc.c.dyn.Resource(gvrSecret).Namespace(objectNS).Update(sc.ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("cannot write the TLS Secret %s/%s: %v", objectNS, tlsSecretName, err)
	}
}

// listenerStatus returns the conditions Envoy Gateway reported for a
// listener of our Gateway, as "Type=Status (Reason)" by type, with the
// messages, and whether the Gateway's spec has that listener.
func (sc *scenarios) listenerStatus(ctx context.Context, listener string) (conds map[string]string, messages map[string]string, inSpec bool) {
	gw, err := sc.get(ctx, gvrGateway, gatewayNS, gatewayXRName)
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
	cp, err := sc.get(ctx, gvrSecret, gatewayNS, tlsSecretName)
	if err != nil {
		return err.Error()
	}
	if v, _, _ := unstructured.NestedString(cp.Object, "data", "tls.crt"); v != base64.StdEncoding.EncodeToString(c.certPEM) {
		return fmt.Sprintf("the copy %s/%s holds another certificate than the one of serial %s", gatewayNS, tlsSecretName, c.serial)
	}
	return ""
}

// modelRoutesReady returns "" when every ModelRoute says RoutingReady=True,
// and otherwise the first that does not.
func (sc *scenarios) modelRoutesReady(ctx context.Context) string {
	return sc.modelRoutesReadyOr(ctx, true)
}

// modelRoutesReadyOr is modelRoutesReady; replays says whether a condition
// Crossplane replayed from its cache counts (replay_test.go).
func (sc *scenarios) modelRoutesReadyOr(ctx context.Context, replays bool) string {
	l, err := sc.c.dyn.Resource(gvrModelRoute).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	if len(l.Items) == 0 {
		return "no ModelRoute"
	}
	for i := range l.Items {
		if !replays && replayed(&l.Items[i], "RoutingReady") {
			continue
		}
		if w := wantCondition(&l.Items[i], "RoutingReady", "True"); w != "" {
			return fmt.Sprintf("ModelRoute %s: %s", key(&l.Items[i]), w)
		}
	}
	return ""
}

// routeOnListener returns "" once the model's AIGatewayRoute names the
// listener and Envoy Gateway has accepted its HTTPRoute there.
func (sc *scenarios) routeOnListener(ctx context.Context, listener string) string {
	ar, err := sc.get(ctx, gvrAIRoute, sc.w.teamNS, routeName)
	if err != nil {
		return err.Error()
	}
	prs, _, _ := unstructured.NestedSlice(ar.Object, "spec", "parentRefs")
	for _, x := range prs {
		if p, _ := x.(map[string]any); p["sectionName"] != listener {
			return fmt.Sprintf("the AIGatewayRoute's parentRef names sectionName %v, want %q", p["sectionName"], listener)
		}
	}
	hr, err := sc.get(ctx, gvrHTTPRoute, sc.w.teamNS, routeName)
	if err != nil {
		return err.Error()
	}
	refs, _, _ := unstructured.NestedSlice(hr.Object, "spec", "parentRefs")
	for _, x := range refs {
		if r, _ := x.(map[string]any); r["sectionName"] != listener {
			return fmt.Sprintf("the model's HTTPRoute names the parents %v, want sectionName %q", refs, listener)
		}
	}
	// Envoy Gateway writes one status entry per parentRef; look for the
	// listener's.
	parents, _, _ := unstructured.NestedSlice(hr.Object, "status", "parents")
	for _, x := range parents {
		p, _ := x.(map[string]any)
		ref, _ := p["parentRef"].(map[string]any)
		if p["controllerName"] != egControllerName || ref["name"] != gatewayXRName || ref["sectionName"] != listener {
			continue
		}
		if a := parentCondition(p, "Accepted"); a != "True (Accepted)" {
			return "the model's HTTPRoute is Accepted=" + a + " on the " + listener + " listener"
		}
		return ""
	}
	return fmt.Sprintf("the model's HTTPRoute has no status from Envoy Gateway for the %s listener: %v", listener, parents)
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

// tlsScenario is scenario 5f. The InferenceGateway gets TLS from a real
// self-signed certificate: the real Envoy Gateway programs its https
// listener, the route moves there, and Envoy is told to serve the
// certificate, /healthz on both listeners and a 308 for everything else on
// http. A certificate Envoy Gateway rejects makes GatewayReady False,
// ListenersNotProgrammed, with Envoy Gateway's words; a renewal never makes
// GatewayReady or any RoutingReady False. TLS is turned off again at the
// end, so that scenarios 6 and 7 start from the gateway they expect.
func (sc *scenarios) tlsScenario(t *testing.T) {
	c, w := sc.c, sc.w
	model := teamControlNS + "/" + routeName // the ModelRoute sets no spec.model
	now := time.Now()

	// 1. TLS on, from a real self-signed certificate.
	good := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	sc.putTLSSecret(t, "first", good)
	start := time.Now()
	sc.patchGateway(t, fmt.Sprintf(`{"spec":{"hostname":%q,"tls":{"certificateRefs":[{"name":%q}]}}}`, tlsHostname, tlsSecretName))
	sc.eventually(t, waitRoute, "GatewayReady=True with the https listener programmed", sc.gatewayServesTLS)
	t.Logf("GatewayReady=True with the https listener programmed %s after TLS was turned on", time.Since(start).Round(100*time.Millisecond))
	sc.eventually(t, waitRoute, "the model's route on the https listener, RoutingReady=True", func(ctx context.Context) string {
		if s := sc.routeOnListener(ctx, gateway.ListenerHTTPS); s != "" {
			return s
		}
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	t.Logf("RoutingReady=True on the https listener %s after TLS was turned on", time.Since(start).Round(100*time.Millisecond))
	d := sc.readXDS(t, "scenario-tls", all(
		checkTLSServed(good.serial),
		checkFrontDoorTLS(tlsHostname),
		checkRouteOn(model, gateway.ListenerHTTPS),
		// Every listener, the https one that serves the models too: the
		// body limit and the caller header's early removal are set on the
		// whole Gateway.
		checkBodyLimit(v1alpha1.DefaultBufferLimit.Value()),
		checkCallerHeaderRemovedEarly,
	))
	t.Logf("xDS: the https listener serves %s with the certificate of serial %s; its private key reads %q",
		gatewayNS+"/"+tlsSecretName, good.serial, tlsSecret(d)["tls_certificate"].(map[string]any)["private_key"])

	// 2a. A certificate with the key of another. The function checks that
	// they belong together: it says TLSSecretMissing and keeps the copy
	// delivered before, so the https listener goes on serving the good
	// certificate.
	other := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	mismatched := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	mismatched.keyPEM = other.keyPEM
	sc.putTLSSecret(t, "mismatched", mismatched)
	sc.gatewayFalse(t, "the mismatched pair", gatewayready.ReasonTLSSecretMissing, "is not the key of the certificate")
	if s := sc.copyHoldsCert(sc.ctx, good); s != "" {
		t.Errorf("the mismatched pair was copied to the gateway cluster: %s", s)
	}
	// What the function prevents: the same pair, written straight into the
	// gateway cluster's copy, takes the https listener down. Envoy Gateway
	// v1.8.3 refuses the pair (internal/gatewayapi/tls.go,
	// parseCertsFromTLSSecretsData: "must contain a matching tls.crt and
	// tls.key"; v1.8.1 programmed it, and Envoy refused it), which leaves
	// the listener without a valid certificate: ResolvedRefs=False
	// (InvalidCertificateRef), not programmed. The provider forces the copy
	// back at its next apply, below.
	cp, err := sc.get(sc.ctx, gvrSecret, gatewayNS, tlsSecretName)
	must(t, err)
	cp.Object["data"] = mismatched.data()
	_, err = c.dyn.Resource(gvrSecret).Namespace(gatewayNS).Update(sc.ctx, cp, metav1.UpdateOptions{})
	must(t, err)
	sc.eventually(t, waitRoute, "Envoy Gateway refusing the mismatched pair written into the gateway cluster's copy", func(ctx context.Context) string {
		conds, msgs, _ := sc.listenerStatus(ctx, gateway.ListenerHTTPS)
		if conds["ResolvedRefs"] != "False (InvalidCertificateRef)" || !strings.Contains(msgs["ResolvedRefs"], "must contain a matching tls.crt and tls.key") {
			return fmt.Sprintf("the https listener is %v (ResolvedRefs: %s)", conds, msgs["ResolvedRefs"])
		}
		return ""
	})
	conds, msgs, _ := sc.listenerStatus(sc.ctx, gateway.ListenerHTTPS)
	t.Logf("a pair whose key is not the certificate's, written into the gateway cluster's copy: Envoy Gateway reports the https listener %v: %s", conds, msgs["ResolvedRefs"])

	// 2. A certificate Envoy Gateway rejects: one that has expired.
	expired := selfSigned(t, tlsHostname, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	sc.putTLSSecret(t, "expired", expired)
	sc.gatewayFalse(t, "the expired certificate", gatewayready.ReasonListenersNotProgrammed, "has expired")
	conds, msgs, _ = sc.listenerStatus(sc.ctx, gateway.ListenerHTTPS)
	if conds["Programmed"] != "False (Invalid)" || conds["ResolvedRefs"] != "False (InvalidCertificateRef)" {
		t.Errorf("Envoy Gateway reports the https listener with the expired certificate as %v; want Programmed=False (Invalid), ResolvedRefs=False (InvalidCertificateRef)", conds)
	}
	t.Logf("Envoy Gateway on the https listener: %v; ResolvedRefs message: %s", conds, msgs["ResolvedRefs"])
	sc.putTLSSecret(t, "first, again", good)
	start = time.Now()
	sc.eventually(t, waitRoute, "GatewayReady=True again with the good certificate", sc.gatewayServesTLS)
	t.Logf("GatewayReady=True %s after the good certificate was restored", time.Since(start).Round(100*time.Millisecond))
	sc.eventually(t, waitRoute, "every ModelRoute RoutingReady=True again", sc.modelRoutesReady)

	// 3. A renewal: a new valid certificate. Nothing may say False while
	// it travels to Envoy.
	if st := sc.agree(t); st != "True" {
		t.Fatalf("GatewayReady settled %s before the renewal, want True", st)
	}
	sc.eventually(t, waitRoute, "every ModelRoute RoutingReady=True before the renewal", sc.modelRoutesReady)
	sc.readXDS(t, "scenario-tls-before-renewal", checkTLSServed(good.serial))
	renewed := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(48*time.Hour))
	sc.putTLSSecret(t, "renewed", renewed)
	start = time.Now()
	sc.holdsThroughRenewal(t, start, func() {
		sc.readXDS(t, "scenario-tls-renewed", checkTLSServed(renewed.serial))
	})

	// TLS off again, as scenarios 6 and 7 expect.
	for _, r := range []string{gateway.ResourceTLSSecretPrefix + tlsSecretName, gateway.ResourceRedirectRoute} {
		if o := sc.composedObject(sc.ctx, objectNS, gatewayXRName, r); o != nil {
			w.allow(allowance{reason: "TLS turned off: the Object of " + r + " goes", resource: "objects", namespace: objectNS, name: o.GetName()})
		}
	}
	w.allow(allowance{reason: "TLS turned off: the redirect goes", resource: "httproutes", namespace: names.FrontDoorNamespace(gatewayNS), name: names.Child(gatewayXRName, names.RedirectSuffix)})
	sc.patchGateway(t, `{"spec":{"tls":null,"hostname":null}}`)
	sc.eventually(t, waitRoute, "GatewayReady=True without TLS", func(ctx context.Context) string {
		if s := wantCondition(sc.gatewayXR(ctx), gateway.ConditionType, "True"); s != "" {
			return s
		}
		if _, _, inSpec := sc.listenerStatus(ctx, gateway.ListenerHTTPS); inSpec {
			return "the Gateway still has its https listener"
		}
		return ""
	})
	sc.eventually(t, waitRoute, "the model's route back on the http listener, RoutingReady=True", func(ctx context.Context) string {
		if s := sc.routeOnListener(ctx, gateway.ListenerHTTP); s != "" {
			return s
		}
		return wantCondition(sc.routeXR(ctx), "RoutingReady", "True")
	})
	sc.eventually(t, waitRoute, "the TLS Secret's copy gone from the gateway cluster", func(ctx context.Context) string {
		if _, err := sc.get(ctx, gvrSecret, gatewayNS, tlsSecretName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})
	must(t, c.dyn.Resource(gvrSecret).Namespace(objectNS).Delete(sc.ctx, tlsSecretName, metav1.DeleteOptions{}))
	sc.noSecretsInObjects(t, "after the TLS scenario")
	sc.noDeletions(t)
	w.check(t)
}

// holdsThroughRenewal runs wait, which returns once the renewed certificate
// is in the xDS, while it checks every 200 ms that GatewayReady and every
// ModelRoute's RoutingReady stay True, and notes when the gateway
// cluster's copy of the Secret changed. The world's recorded transitions
// are checked too, for a False between two polls.
func (sc *scenarios) holdsThroughRenewal(t *testing.T, start time.Time, wait func()) {
	t.Helper()
	before, err := sc.get(sc.ctx, gvrSecret, gatewayNS, tlsSecretName)
	must(t, err)
	oldCopy, _, _ := unstructured.NestedString(before.Object, "data", "tls.crt")
	ctx, cancel := context.WithCancel(sc.ctx)
	var (
		mu       sync.Mutex
		failures []string
		polls    int
		copied   time.Duration
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			msgs := []string{}
			// A condition Crossplane replayed from its cache is not the
			// function's verdict (replay_test.go): the world judges it,
			// and noFalseSince below waits until it has.
			if gw := sc.gatewayXR(ctx); !replayed(gw, gateway.ConditionType) {
				if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" && ctx.Err() == nil {
					msgs = append(msgs, "InferenceGateway: "+s)
				}
			}
			if s := sc.modelRoutesReadyOr(ctx, false); s != "" && ctx.Err() == nil {
				msgs = append(msgs, s)
			}
			cp, err := sc.get(ctx, gvrSecret, gatewayNS, tlsSecretName)
			mu.Lock()
			polls++
			if err == nil && copied == 0 {
				if v, _, _ := unstructured.NestedString(cp.Object, "data", "tls.crt"); v != oldCopy {
					copied = time.Since(start)
				}
			}
			for _, m := range msgs {
				failures = append(failures, fmt.Sprintf("%s after the renewal: %s", time.Since(start).Round(100*time.Millisecond), m))
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	wait()
	served := time.Since(start)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("renewal: the gateway cluster's copy changed %s and Envoy Gateway served the new certificate %s after the control-plane Secret; checked %d times every 200 ms",
		copied.Round(100*time.Millisecond), served.Round(100*time.Millisecond), polls)
	if polls == 0 {
		t.Errorf("renewal: GatewayReady and RoutingReady were never checked")
	}
	for _, f := range failures {
		t.Errorf("renewal: %s", f)
	}
	sc.noFalseSince(t, start, "renewal")
}

// allRouteTransitions returns the recorded RoutingReady changes of every
// ModelRoute, by namespace/name.
func (w *world) allRouteTransitions() map[string][]transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoteLocked(time.Now())
	out := make(map[string][]transition, len(w.byRoute))
	for k, v := range w.byRoute {
		out[k] = slices.Clone(v)
	}
	return out
}

// listenerNamed returns our Gateway's xDS listener for a Gateway listener.
func (d xdsDump) listenerNamed(listener string) map[string]any {
	for _, l := range d.gatewayListeners() {
		if l["name"] == gatewayNS+"/"+gatewayXRName+"/"+listener {
			return l
		}
	}
	return nil
}

// routeConfig returns the route configuration of a Gateway listener, named
// like its listener by Envoy Gateway.
func (d xdsDump) routeConfig(listener string) map[string]any {
	for _, rc := range d["routes"] {
		if rc["name"] == gatewayNS+"/"+gatewayXRName+"/"+listener {
			return rc
		}
	}
	return nil
}

// tlsSecret returns the xDS secret of the TLS Secret's copy, named
// <namespace>/<name> by Envoy Gateway (gateway v1.8.3
// internal/gatewayapi/helpers.go, irTLSListenerConfigName).
func tlsSecret(d xdsDump) map[string]any {
	for _, s := range d["secrets"] {
		if s["name"] == gatewayNS+"/"+tlsSecretName {
			return s
		}
	}
	return nil
}

// sdsNames are the names of the certificates a listener's filter chains
// ask for over SDS (gateway v1.8.3 internal/xds/translator/listener.go,
// buildXdsDownstreamTLSSocket).
func sdsNames(l map[string]any) []string {
	var out []string
	fcs, _ := l["filter_chains"].([]any)
	for _, fc := range fcs {
		cfgs, _, _ := unstructured.NestedSlice(fc.(map[string]any), "transport_socket", "typed_config", "common_tls_context", "tls_certificate_sds_secret_configs")
		for _, c := range cfgs {
			n, _ := c.(map[string]any)["name"].(string)
			out = append(out, n)
		}
	}
	return out
}

// checkTLSServed: the https listener asks for the certificate of the TLS
// Secret's copy, and the xDS secret of that name holds the certificate of
// serial want with its private key redacted by the reader. Envoy Gateway
// sends both inline (buildXdsTLSCertSecret).
func checkTLSServed(want *big.Int) func(xdsDump) string {
	return func(d xdsDump) string {
		l := d.listenerNamed(gateway.ListenerHTTPS)
		if l == nil {
			return "no https listener of our Gateway in the xDS"
		}
		name := gatewayNS + "/" + tlsSecretName
		if got := sdsNames(l); !slices.Contains(got, name) {
			return fmt.Sprintf("the https listener asks for the certificates %v, not %q", got, name)
		}
		s := tlsSecret(d)
		if s == nil {
			return fmt.Sprintf("no xDS secret %q", name)
		}
		if k, _, _ := unstructured.NestedFieldNoCopy(s, "tls_certificate", "private_key"); k != "<redacted>" {
			b, _ := json.Marshal(k)
			return fmt.Sprintf("the reader did not redact the private key of %q: it is a %T of %d bytes", name, k, len(b))
		}
		chain, _, _ := unstructured.NestedString(s, "tls_certificate", "certificate_chain", "inline_bytes")
		raw, err := base64.StdEncoding.DecodeString(chain)
		if err != nil {
			return fmt.Sprintf("the certificate chain of %q is not base64: %v", name, err)
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			return fmt.Sprintf("the certificate chain of %q holds no PEM", name)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fmt.Sprintf("cannot parse the certificate of %q: %v", name, err)
		}
		if cert.SerialNumber.Cmp(want) != 0 {
			return fmt.Sprintf("the xDS secret %q holds the certificate of serial %s, not yet %s", name, cert.SerialNumber, want)
		}
		return ""
	}
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
		if r, rc := d.modelRoute(model); r == nil || rc != gatewayNS+"/"+gatewayXRName+"/"+listener {
			return fmt.Sprintf("the route of %q is in the route configuration %q, want the %s listener's", model, rc, listener)
		}
		return ""
	}
}

// gatewayFalse waits until GatewayReady is False with reason and a message
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
		if r := conditionReason(gw, gateway.ConditionType); r != reason || !strings.Contains(msg, want) {
			return fmt.Sprintf("GatewayReady False (%s): %s", r, msg)
		}
		got = msg
		return ""
	})
	t.Logf("GatewayReady=False %s after %s was written: %s", time.Since(start).Round(100*time.Millisecond), written, got)
}
