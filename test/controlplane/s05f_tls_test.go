package controlplane

import (
	"context"
	"crypto/x509"
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
	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
)

// The TLS scenario: the InferenceGateway terminates TLS with a real
// self-signed certificate, Envoy Gateway rejects a bad one, and a renewal
// never makes the gateway or its routes say False.

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
	model := harness.TeamControlNS + "/" + harness.RouteName // the ModelRoute sets no spec.model
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
		harness.GatewayNS+"/"+tlsSecretName, good.serial, tlsSecret(d)["tls_certificate"].(map[string]any)["private_key"])

	// 2a. A certificate with the key of another. The function checks that
	// they belong together: it says TLSSecretMissing and keeps the copy
	// delivered before, so the https listener goes on serving the good
	// certificate.
	other := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	mismatched := selfSigned(t, tlsHostname, now.Add(-time.Hour), now.Add(24*time.Hour))
	mismatched.KeyPEM = other.KeyPEM
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
	cp, err := sc.get(sc.ctx, harness.GVRSecret, harness.GatewayNS, tlsSecretName)
	harness.Must(t, err)
	cp.Object["data"] = mismatched.data()
	_, err = c.Dyn.Resource(harness.GVRSecret).Namespace(harness.GatewayNS).Update(sc.ctx, cp, metav1.UpdateOptions{})
	harness.Must(t, err)
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
		if o := sc.composedObject(sc.ctx, harness.ObjectNS, harness.GatewayXRName, r); o != nil {
			w.Allow(harness.Allowance{Reason: "TLS turned off: the Object of " + r + " goes", Resource: "objects", Namespace: harness.ObjectNS, Name: o.GetName()})
		}
	}
	w.Allow(harness.Allowance{Reason: "TLS turned off: the redirect goes", Resource: "httproutes", Namespace: names.FrontDoorNamespace(harness.GatewayNS), Name: names.Child(harness.GatewayXRName, names.RedirectSuffix)})
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
		if _, err := sc.get(ctx, harness.GVRSecret, harness.GatewayNS, tlsSecretName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.ObjectNS).Delete(sc.ctx, tlsSecretName, metav1.DeleteOptions{}))
	sc.noSecretsInObjects(t, "after the TLS scenario")
	sc.noDeletions(t)
	w.Check(t)
}

// modelRoutesReady returns "" when every ModelRoute says RoutingReady=True,
// and otherwise the first that does not.
func (sc *scenarios) modelRoutesReady(ctx context.Context) string {
	return sc.modelRoutesReadyOr(ctx, true)
}

// modelRoutesReadyOr is modelRoutesReady; replays says whether a condition
// Crossplane replayed from its cache counts (harness/replay.go).
func (sc *scenarios) modelRoutesReadyOr(ctx context.Context, replays bool) string {
	l, err := sc.c.Dyn.Resource(harness.GVRModelRoute).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	if len(l.Items) == 0 {
		return "no ModelRoute"
	}
	for i := range l.Items {
		if !replays && harness.Replayed(&l.Items[i], "RoutingReady") {
			continue
		}
		if w := wantCondition(&l.Items[i], "RoutingReady", "True"); w != "" {
			return fmt.Sprintf("ModelRoute %s: %s", harness.Key(&l.Items[i]), w)
		}
	}
	return ""
}

// routeOnListener returns "" once the model's AIGatewayRoute names the
// listener and Envoy Gateway has accepted its HTTPRoute there.
func (sc *scenarios) routeOnListener(ctx context.Context, listener string) string {
	ar, err := sc.get(ctx, harness.GVRAIRoute, sc.w.TeamNS, harness.RouteName)
	if err != nil {
		return err.Error()
	}
	prs, _, _ := unstructured.NestedSlice(ar.Object, "spec", "parentRefs")
	for _, x := range prs {
		if p, _ := x.(map[string]any); p["sectionName"] != listener {
			return fmt.Sprintf("the AIGatewayRoute's parentRef names sectionName %v, want %q", p["sectionName"], listener)
		}
	}
	hr, err := sc.get(ctx, harness.GVRHTTPRoute, sc.w.TeamNS, harness.RouteName)
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
		if p["controllerName"] != harness.EGControllerName || ref["name"] != harness.GatewayXRName || ref["sectionName"] != listener {
			continue
		}
		if a := parentCondition(p, "Accepted"); a != "True (Accepted)" {
			return "the model's HTTPRoute is Accepted=" + a + " on the " + listener + " listener"
		}
		return ""
	}
	return fmt.Sprintf("the model's HTTPRoute has no status from Envoy Gateway for the %s listener: %v", listener, parents)
}

// holdsThroughRenewal runs wait, which returns once the renewed certificate
// is in the xDS, while it checks every 200 ms that GatewayReady and every
// ModelRoute's RoutingReady stay True, and notes when the gateway
// cluster's copy of the Secret changed. The world's recorded transitions
// are checked too, for a False between two polls.
func (sc *scenarios) holdsThroughRenewal(t *testing.T, start time.Time, wait func()) {
	t.Helper()
	before, err := sc.get(sc.ctx, harness.GVRSecret, harness.GatewayNS, tlsSecretName)
	harness.Must(t, err)
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
			// function's verdict (harness/replay.go): the world judges it,
			// and noFalseSince below waits until it has.
			if gw := sc.gatewayXR(ctx); !harness.Replayed(gw, gateway.ConditionType) {
				if s := wantCondition(gw, gateway.ConditionType, "True"); s != "" && ctx.Err() == nil {
					msgs = append(msgs, "InferenceGateway: "+s)
				}
			}
			if s := sc.modelRoutesReadyOr(ctx, false); s != "" && ctx.Err() == nil {
				msgs = append(msgs, s)
			}
			cp, err := sc.get(ctx, harness.GVRSecret, harness.GatewayNS, tlsSecretName)
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

// tlsSecret returns the xDS secret of the TLS Secret's copy, named
// <namespace>/<name> by Envoy Gateway (gateway v1.8.3
// internal/gatewayapi/helpers.go, irTLSListenerConfigName).
func tlsSecret(d xdsDump) map[string]any {
	for _, s := range d["secrets"] {
		if s["name"] == harness.GatewayNS+"/"+tlsSecretName {
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
		name := harness.GatewayNS + "/" + tlsSecretName
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
