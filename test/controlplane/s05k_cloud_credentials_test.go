package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// cloudCredentials is scenario 5k: one backend of each cloud, its
// credential from a control-plane Secret, proven end to end through the
// real AI Gateway v1.0.0 and its own ext_proc (cloudEndToEnd): AWS signed
// with SigV4 by a credentials file, GCP and Azure with the token the
// controller gets for a service account key and a client secret. No
// credential is in any Object, XR or event.
func (sc *scenarios) cloudCredentials(t *testing.T) {
	sc.cloudAWS(t)
	sc.cloudGCP(t)
	sc.cloudAzure(t)
}

// A cloudCase is one backend of a cloud, its credential from a
// control-plane Secret, and what proves it.
type cloudCase struct {
	name       string // the cloud's service, for messages
	policyType string // the BackendSecurityPolicy's type
	route      string // the ModelRoute
	secret     string // the control-plane Secret
	// copyKey is the key of the Secret's one value, and the key AI Gateway
	// reads in the copy on the gateway cluster.
	secretKey, copyKey string
	secretValue        []byte
	backend            map[string]any // the route's one backend
	// auth says what is wrong with the backend's auth in AI Gateway's
	// filter config, or "".
	auth func(backendAuth) string
	// tokenSecret: AI Gateway keeps the token it got in a Secret of its
	// own, owned by the policy (ai-gateway v1.0.0
	// internal/controller/rotators/common.go, GetBSPSecretName:
	// ai-eg-bsp-<policy>), which goes with it.
	tokenSecret bool
	// verifyAWS, when set, are the credentials xds-reader checks the
	// request's SigV4 signature against.
	verifyAWS map[string]string
	// proof checks the request AI Gateway's ext_proc hands back for the
	// route's model, and returns the values its dump must not show, with
	// what replaces them.
	proof func(t *testing.T, res extProcResult, model string) map[string]string
	dump  string // the $CONTROLPLANE_XDS file
}

// cloudEndToEnd is one cloudCase: the route RoutingReady, the real AI
// Gateway accepting its policy and writing the backend's auth into its
// filter config (ai-gateway v1.0.0 internal/controller/gateway.go,
// bspToFilterAPIBackendAuth), the copy on the gateway cluster holding the
// credential under the key AI Gateway reads; then AI Gateway's own ext_proc
// on that filter config (throughExtProc) handing back the request the
// case's proof checks.
func (sc *scenarios) cloudEndToEnd(t *testing.T, cc cloudCase) {
	c, w := sc.c, sc.w
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: cc.secret, Namespace: harness.TeamControlNS},
		Data:       map[string][]byte{cc.secretKey: cc.secretValue}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	harness.Must(t, err)
	c.Create(sc.ctx, harness.GVRSecret, &unstructured.Unstructured{Object: m})

	r := plainRoute(cc.route, "unused.example.com")
	r.Object["spec"].(map[string]any)["backends"] = []any{cc.backend}
	backendName := cc.backend["name"].(string)
	created := time.Now()
	c.Apply(sc.ctx, r)
	policy := names.BackendObject(cc.route, backendName)
	sc.eventually(t, waitRoute, "the "+cc.name+" route RoutingReady, its "+cc.policyType+" policy accepted and its auth in AI Gateway's filter config", func(ctx context.Context) string {
		xr, err := sc.get(ctx, harness.GVRModelRoute, harness.TeamControlNS, cc.route)
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
		if typ, _, _ := unstructured.NestedString(bsp.Object, "spec", "type"); typ != cc.policyType {
			return fmt.Sprintf("the BackendSecurityPolicy %s is of type %q, want %s", policy, typ, cc.policyType)
		}
		// AI Gateway's condition types are Accepted and NotAccepted
		// (ai-gateway v1.0.0 api/v1beta1/status.go).
		if st := harness.ConditionStatus(bsp, "Accepted"); st != "True" {
			return fmt.Sprintf("the BackendSecurityPolicy %s: Accepted=%q (%v)", policy, st, harness.Condition(bsp, "NotAccepted")["message"])
		}
		_, _, problem := sc.filterConfigAuth(ctx, cc.route, backendName, cc.auth)
		return problem
	})
	t.Logf("scenario 5k: the %s route RoutingReady, its %s policy accepted and its auth in AI Gateway's filter config %s after the route's creation",
		cc.name, cc.policyType, time.Since(created).Round(time.Second))

	cp, err := sc.get(sc.ctx, harness.GVRSecret, w.TeamNS, policy)
	harness.Must(t, err)
	if got, _, _ := unstructured.NestedString(cp.Object, "data", cc.copyKey); got != base64.StdEncoding.EncodeToString(cc.secretValue) {
		t.Errorf("the Secret copy %s/%s does not hold the control plane's credential under %s (keys: %v)", w.TeamNS, policy, cc.copyKey, slices.Sorted(maps.Keys(dataOf(cp))))
	}
	sc.noSecretsInObjects(t, "scenario 5k")

	raw, backend, problem := sc.filterConfigAuth(sc.ctx, cc.route, backendName, cc.auth)
	if problem != "" {
		t.Fatalf("scenario 5k: %s", problem)
	}
	model := sc.routeModel(t, cc.route)
	out, res := sc.throughExtProc(t, raw, backend, model, cc.verifyAWS)
	w.Mu.Lock()
	for _, v := range w.Secrets {
		if strings.Contains(string(out), v.Value) {
			t.Errorf("scenario 5k: what AI Gateway's ext_proc handed back for %s holds %s", cc.name, v.What)
		}
	}
	w.Mu.Unlock()
	writeExtProcDump(t, cc.dump, out, cc.proof(t, res, model))

	// Leave as found.
	allow := []harness.Allowance{
		{Reason: "scenario 5k deletes its route", Resource: "backendsecuritypolicies", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "secrets", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "backends", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its route", Resource: "aiservicebackends", Namespace: w.TeamNS, Name: policy},
		{Reason: "scenario 5k deletes its credentials", Resource: "secrets", Namespace: harness.TeamControlNS, Name: cc.secret},
	}
	if cc.tokenSecret {
		allow = append(allow, harness.Allowance{Reason: "scenario 5k deletes its route: AI Gateway's token Secret goes with the policy", Resource: "secrets", Namespace: w.TeamNS, Name: "ai-eg-bsp-" + policy})
	}
	for _, a := range allow {
		w.Allow(a)
	}
	sc.deleteRoute(t, cc.route, "scenario 5k deletes its route")
	harness.Must(t, c.Dyn.Resource(harness.GVRSecret).Namespace(harness.TeamControlNS).Delete(sc.ctx, cc.secret, metav1.DeleteOptions{}))
}

// The AWS part of scenario 5k: an Amazon Bedrock backend with an AWS
// credentials file.
const (
	cloudKeyID      = "AKIACONTROLPLANE0001"
	cloudSecretPart = "controlplane-example-only-aws-secret"
	cloudRegion     = "eu-west-1"
	// cloudModelID is the Bedrock model the backend is sent, as AWS names
	// it: the ext_proc puts it in the Converse path.
	cloudModelID = "anthropic.claude-3-haiku-20240307-v1:0"
)

// cloudAWS is AWS end to end (cloudEndToEnd). AI Gateway writes the
// credentials file, with the region, into the backend's auth
// (internal/filterapi/filterconfig.go, AWSAuth); its ext_proc must hand
// back the request for Bedrock signed with SigV4 by the Secret's key id,
// for eu-west-1 and the bedrock service, dated by its x-amz-date, and
// xds-reader, signing that request anew with the Secret's key pair, must
// get the same signature: the secret key that travelled signed it.
func (sc *scenarios) cloudAWS(t *testing.T) {
	file := "[default]\naws_access_key_id = " + cloudKeyID + "\naws_secret_access_key = " + cloudSecretPart + "\n"
	// The world looks for them in every Object, XR and event it observes.
	sc.w.Forbid("the AWS credentials file", base64.StdEncoding.EncodeToString([]byte(file)))
	sc.w.Forbid("the AWS secret access key", base64.StdEncoding.EncodeToString([]byte(cloudSecretPart)))
	sc.cloudEndToEnd(t, cloudCase{
		name: "Bedrock", policyType: "AWSCredentials", route: "cloud-model",
		secret: "aws-creds", secretKey: "credentials", copyKey: "credentials", secretValue: []byte(file),
		backend: map[string]any{
			"name":              "bedrock",
			"endpoint":          map[string]any{"hostname": "bedrock-runtime." + cloudRegion + ".amazonaws.com"},
			"schema":            map[string]any{"name": "AWSBedrock"},
			"modelNameOverride": cloudModelID,
			"credentials": map[string]any{"aws": map[string]any{
				"region": cloudRegion, "secretRef": map[string]any{"name": "aws-creds", "key": "credentials"},
			}},
		},
		auth: func(a backendAuth) string {
			switch {
			case a.AWS == nil:
				return "no AWS auth"
			case a.AWS.Region != cloudRegion:
				return fmt.Sprintf("AWS auth for region %q, want %q", a.AWS.Region, cloudRegion)
			case !strings.Contains(a.AWS.CredentialFileLiteral, "aws_access_key_id = "+cloudKeyID):
				return "a credentials file without the key id " + cloudKeyID
			}
			return ""
		},
		verifyAWS: map[string]string{"accessKeyID": cloudKeyID, "secretAccessKey": cloudSecretPart, "region": cloudRegion},
		proof:     signedWithSigV4,
		dump:      "scenario-cloud-aws",
	})
}

// signedWithSigV4 is the AWS proof (cloudAWS).
func signedWithSigV4(t *testing.T, res extProcResult, model string) map[string]string {
	t.Helper()
	h := res.Request.Headers
	auth := h["authorization"]
	m := sigV4.FindStringSubmatch(auth)
	switch {
	case m == nil:
		t.Errorf("scenario 5k: the request for Bedrock is not signed with SigV4: authorization %q", redactSignature(auth))
	case m[1] != cloudKeyID:
		t.Errorf("scenario 5k: signed with key id %s, want the control-plane Secret's %s", m[1], cloudKeyID)
	case m[3] != cloudRegion || m[4] != "bedrock":
		t.Errorf("scenario 5k: signed for %s/%s, want %s/bedrock", m[3], m[4], cloudRegion)
	case !strings.HasPrefix(h["x-amz-date"], m[2]+"T"):
		t.Errorf("scenario 5k: signed for the date %s, but x-amz-date is %q", m[2], h["x-amz-date"])
	}
	if res.SignatureVerified == nil || !*res.SignatureVerified {
		t.Errorf("scenario 5k: the signature is not the one the control-plane Secret's key pair makes of the request: %s", redactSignature(res.SignatureProblem))
	}
	// AI Gateway translates the chat completion into Bedrock's Converse
	// API for the backend's model (ai-gateway v1.0.0
	// internal/translator/openai_awsbedrock.go).
	if want := "/model/" + url.PathEscape(cloudModelID) + "/converse"; h[":path"] != want {
		t.Errorf("scenario 5k: the request goes to %q, want Bedrock's Converse path %q", h[":path"], want)
	}
	if h["x-ai-eg-model"] != model {
		t.Errorf("scenario 5k: x-ai-eg-model %q, want the route's model %q", h["x-ai-eg-model"], model)
	}
	if !strings.Contains(res.Request.Body, `"text":"Say hello."`) {
		t.Errorf("scenario 5k: the body for Bedrock is not the message in Converse's form: %s", res.Request.Body)
	}
	t.Logf("scenario 5k: AI Gateway's ext_proc sent %s %s signed %s, x-amz-date %s; the signature is the Secret's key pair's: %v",
		h[":method"], h[":path"], redactSignature(auth), h["x-amz-date"], res.SignatureVerified != nil && *res.SignatureVerified)
	return map[string]string{auth: redactSignature(auth)}
}

// backendAuth is a backend's auth in AI Gateway's filter config
// (ai-gateway v1.0.0 internal/filterapi/filterconfig.go, BackendAuth):
// only what scenario 5k reads of it.
type backendAuth struct {
	AWS *struct {
		CredentialFileLiteral string `json:"credentialFileLiteral"`
		Region                string `json:"region"`
	} `json:"aws"`
	GCP *struct {
		AccessToken string `json:"accessToken"`
		Region      string `json:"region"`
		ProjectName string `json:"projectName"`
	} `json:"gcp"`
	Azure *struct {
		AccessToken string `json:"accessToken"`
	} `json:"azure"`
}

// filterConfigAuth reads AI Gateway's filter-config Secret and returns it
// with the name it gives the route's backend, or what is not there yet:
// the backend, or auth that check passes (it returns what is wrong). It
// never prints a credential.
func (sc *scenarios) filterConfigAuth(ctx context.Context, routeName, backendName string, check func(backendAuth) string) (raw []byte, backend, problem string) {
	s, err := sc.get(ctx, harness.GVRSecret, harness.EnvoyGatewayNS, filterConfigSecret)
	if err != nil {
		return nil, "", err.Error()
	}
	enc, _, _ := unstructured.NestedString(s.Object, "data", "filter-config.yaml")
	raw, err = base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, "", fmt.Sprintf("cannot decode the filter-config Secret's filter-config.yaml: %v", err)
	}
	var cfg struct {
		Backends []struct {
			Name string       `json:"name"`
			Auth *backendAuth `json:"auth"`
		} `json:"backends"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, "", fmt.Sprintf("cannot read the filter config: %v", err)
	}
	object := names.BackendObject(routeName, backendName)
	var seen []string
	for _, b := range cfg.Backends {
		seen = append(seen, b.Name)
		// AI Gateway names a backend of its filter config
		// <namespace>/<AIServiceBackend>/route/<route>/rule/<i>/ref/<j>
		// (ai-gateway v1.0.0 internal/internalapi/internalapi.go,
		// PerRouteRuleRefBackendName).
		if !strings.Contains(b.Name, "/"+object+"/route/") {
			continue
		}
		if b.Auth == nil {
			return nil, "", fmt.Sprintf("the filter config's backend %s has no auth", b.Name)
		}
		if why := check(*b.Auth); why != "" {
			return nil, "", fmt.Sprintf("the filter config's backend %s has %s", b.Name, why)
		}
		return raw, b.Name, ""
	}
	return nil, "", fmt.Sprintf("the filter config has no backend %s yet (backends: %v)", object, seen)
}

// extProcBackendAttribute is the attribute in which Envoy's upstream
// ext_proc filter tells AI Gateway's ext_proc which backend it picked: the
// backend's name in the filter config, from the endpoint's metadata
// (ai-gateway v1.0.0 internal/internalapi/internalapi.go,
// XDSUpstreamHostMetadataBackendNamePath; internal/extproc/server.go,
// setBackend).
const extProcBackendAttribute = "xds.upstream_host_metadata.filter_metadata['aigateway.envoy.io']['per_route_rule_backend_name']"

// extProcResult is what xds-reader -ext-proc prints.
type extProcResult struct {
	Router   []map[string]any `json:"router"`
	Upstream []map[string]any `json:"upstream"`
	Request  struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	SignatureVerified *bool  `json:"signatureVerified"`
	SignatureProblem  string `json:"signatureProblem"`
}

// throughExtProc starts AI Gateway's own ext_proc (the sidecar's binary,
// from the pinned module) on the filter config raw, which its controller
// wrote, and plays it a chat completion "Say hello." for model as
// Envoy's two AI Gateway filters send it (xds-reader -ext-proc: the router
// filter's headers and body, then the upstream filter's headers with the
// backend Envoy picked). verifyAWS, when set, are the credentials the
// reader checks the request's SigV4 signature against. It returns what
// the reader printed, and that decoded.
func (sc *scenarios) throughExtProc(t *testing.T, raw []byte, backend, model string, verifyAWS map[string]string) ([]byte, extProcResult) {
	t.Helper()
	addr := sc.c.StartExtProc(sc.ctx, t, raw)
	in, err := json.Marshal(map[string]any{
		"headers": map[string]string{
			":method": "POST", ":path": "/v1/chat/completions", ":scheme": "https", ":authority": "gateway.example.com",
			"content-type": "application/json", "x-request-id": "scenario-5k",
		},
		"body":       `{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":"Say hello."}]}`,
		"attributes": map[string]string{extProcBackendAttribute: backend},
		"verifyAWS":  verifyAWS,
	})
	harness.Must(t, err)
	ctx, cancel := context.WithTimeout(sc.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sc.c.Bins[harness.ToolXDSReader.Name], "-ext-proc", "-address", addr, "-timeout", "30s")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scenario 5k: cannot play the request through AI Gateway's ext_proc: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res extProcResult
	harness.Must(t, json.Unmarshal(out, &res))
	return out, res
}

// routeModel is the model name a ModelRoute serves, from its status.
func (sc *scenarios) routeModel(t *testing.T, route string) string {
	t.Helper()
	xr, err := sc.get(sc.ctx, harness.GVRModelRoute, harness.TeamControlNS, route)
	harness.Must(t, err)
	model, _, _ := unstructured.NestedString(xr.Object, "status", "model")
	if model == "" {
		t.Fatalf("the ModelRoute %s has no status.model", route)
	}
	return model
}

// writeExtProcDump writes what the ext_proc returned to
// $CONTROLPLANE_XDS/<name>.json when that is set, with every secret
// given replaced by <redacted>, in plain text and in the base64 in which
// protojson prints the answers' header values.
func writeExtProcDump(t *testing.T, name string, out []byte, secrets map[string]string) {
	dir := os.Getenv("CONTROLPLANE_XDS")
	if dir == "" {
		return
	}
	dump := string(out)
	for secret, redacted := range secrets {
		dump = strings.ReplaceAll(dump, base64.StdEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(redacted)))
		dump = strings.ReplaceAll(dump, secret, redacted)
	}
	harness.Must(t, os.MkdirAll(dir, 0o755))
	harness.WriteFile(t, filepath.Join(dir, name+".json"), []byte(dump))
}

// sigV4 is a SigV4 Authorization: the key id, the date, the region and
// the service it is scoped to.
var sigV4 = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)/([0-9]{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`)

// signatureValue is the signature of a SigV4 Authorization.
var signatureValue = regexp.MustCompile(`Signature=[0-9a-f]{64}`)

// redactSignature hides SigV4 signatures: one is a credential for the
// next 15 minutes, for the request it signs.
func redactSignature(s string) string {
	return signatureValue.ReplaceAllString(s, "Signature=<redacted>")
}

// dataOf is a Secret's data, for its keys: never print the values.
func dataOf(u *unstructured.Unstructured) map[string]any {
	m, _, _ := unstructured.NestedMap(u.Object, "data")
	return m
}

// bearer is the proof of a cloud whose ext_proc sends the token AI
// Gateway's controller got for the credential (*token, which the case's
// auth keeps) as the request's Bearer, to path, the message in form.
func bearer(name string, token *string, path, form string) func(*testing.T, extProcResult, string) map[string]string {
	return func(t *testing.T, res extProcResult, _ string) map[string]string {
		t.Helper()
		h := res.Request.Headers
		if h["authorization"] != "Bearer "+*token {
			t.Errorf("scenario 5k: the request for %s is not authorized with the token the credential got (authorization starts %.12q)", name, h["authorization"])
		}
		if h[":path"] != path {
			t.Errorf("scenario 5k: the request goes to %q, want %s's %q", h[":path"], name, path)
		}
		if !strings.Contains(res.Request.Body, "Say hello.") {
			t.Errorf("scenario 5k: the body for %s does not carry the message in %s: %s", name, form, res.Request.Body)
		}
		t.Logf("scenario 5k: AI Gateway's ext_proc sent %s %s with the Bearer token the %s credential got", h[":method"], h[":path"], name)
		// The answer holds the whole header value in base64, the request
		// the token alone.
		return map[string]string{"Bearer " + *token: "Bearer <redacted>", *token: "<redacted>"}
	}
}

// issuedTo reports whether a stand-in gave identity the token.
func issuedTo(issued []harness.IssuedToken, identity, token string) bool {
	return token != "" && slices.ContainsFunc(issued, func(it harness.IssuedToken) bool { return it.Issuer == identity && it.Token == token })
}

// The GCP half of scenario 5k: a Vertex AI backend with a service
// account's JSON key.
const (
	vertexProject = "modelplane-test"
	vertexRegion  = "europe-west4"
	vertexAccount = "vertex-invoker@" + vertexProject + ".iam.gserviceaccount.com"
	vertexModelID = "gemini-2.0-flash"
)

// cloudGCP is GCP end to end (cloudEndToEnd). The service account's key,
// made here, names the stand-in of Google's token endpoint in its
// token_uri (harness.GoogleTokens), which answers only a JWT that key
// signed; AI Gateway's controller exchanges it there (ai-gateway v1.0.0
// internal/controller/backend_security_policy.go, rotateCredential) and
// writes the token into the backend's auth, and its ext_proc prefixes the
// translator's generateContent path with the project and region
// (internal/backendauth/gcp.go, Do; internal/translator/gemini_helper.go,
// buildGCPModelPathSuffix).
func (sc *scenarios) cloudGCP(t *testing.T) {
	google := sc.s.Up.Google
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	harness.Must(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	harness.Must(t, err)
	google.Register(vertexAccount, &key.PublicKey)
	keyJSON, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": vertexProject, "private_key_id": "controlplane-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": vertexAccount, "client_id": "1", "token_uri": google.URL(),
	})
	harness.Must(t, err)
	sc.w.Forbid("the GCP service account key", base64.StdEncoding.EncodeToString(keyJSON))
	sc.w.Forbid("the GCP private key", base64.StdEncoding.EncodeToString(der))
	var token string
	sc.cloudEndToEnd(t, cloudCase{
		name: "Vertex AI", policyType: "GCPCredentials", route: "vertex-model",
		secret: "gcp-sa", secretKey: "key.json", copyKey: "service_account.json", secretValue: keyJSON,
		backend: map[string]any{
			"name":              "vertex",
			"endpoint":          map[string]any{"hostname": vertexRegion + "-aiplatform.googleapis.com"},
			"schema":            map[string]any{"name": "GCPVertexAI"},
			"modelNameOverride": vertexModelID,
			"credentials": map[string]any{"gcp": map[string]any{
				"projectName": vertexProject, "region": vertexRegion,
				"secretRef": map[string]any{"name": "gcp-sa", "key": "key.json"},
			}},
		},
		auth: func(a backendAuth) string {
			switch {
			case a.GCP == nil:
				return "no GCP auth"
			case a.GCP.ProjectName != vertexProject || a.GCP.Region != vertexRegion:
				return fmt.Sprintf("GCP auth for %s/%s, want %s/%s", a.GCP.ProjectName, a.GCP.Region, vertexProject, vertexRegion)
			case !issuedTo(google.Issued(), vertexAccount, a.GCP.AccessToken):
				return "no access token the stand-in of Google's token endpoint gave " + vertexAccount
			}
			token = a.GCP.AccessToken
			return ""
		},
		tokenSecret: true,
		proof:       bearer("Vertex AI", &token, "/v1/projects/"+vertexProject+"/locations/"+vertexRegion+"/publishers/google/models/"+vertexModelID+":generateContent", "Gemini's form"),
		dump:        "scenario-cloud-gcp",
	})
}

// The Azure half of scenario 5k: an Azure OpenAI backend with a service
// principal's client secret.
const (
	azureTenant     = "modelplane-test.onmicrosoft.com"
	azureClientID   = "00000000-0000-4000-8000-00000000c0de"
	azureSecretPart = "controlplane-example-only-azure-client-secret"
	azureDeployment = "gpt-4o-mini"
	azureAPIVersion = "2024-10-21"
)

// cloudAzure is Azure end to end (cloudEndToEnd). AI Gateway's controller
// asks Microsoft Entra ID for a token with the client secret (ai-gateway
// v1.0.0 internal/controller/tokenprovider/
// azure_client_secret_token_provider.go), here the stand-in
// harness.MicrosoftEntra, which grants one only for that client ID and
// secret; its ext_proc sends the chat completion to the deployment's
// chat completions with the schema's api-version
// (internal/translator/openai_azureopenai.go) and the token as its Bearer
// (internal/backendauth/azure.go).
func (sc *scenarios) cloudAzure(t *testing.T) {
	entra := sc.s.Up.Entra
	entra.Register(azureTenant, azureClientID, azureSecretPart)
	sc.w.Forbid("the Azure client secret", base64.StdEncoding.EncodeToString([]byte(azureSecretPart)))
	var token string
	sc.cloudEndToEnd(t, cloudCase{
		name: "Azure OpenAI", policyType: "AzureCredentials", route: "azure-model",
		secret: "azure-sp", secretKey: "client-secret", copyKey: "client-secret", secretValue: []byte(azureSecretPart),
		backend: map[string]any{
			"name":              "azure",
			"endpoint":          map[string]any{"hostname": "modelplane-test.openai.azure.com"},
			"schema":            map[string]any{"name": "AzureOpenAI", "version": azureAPIVersion},
			"modelNameOverride": azureDeployment,
			"credentials": map[string]any{"azure": map[string]any{
				"clientID": azureClientID, "tenantID": azureTenant,
				"clientSecretRef": map[string]any{"name": "azure-sp", "key": "client-secret"},
			}},
		},
		auth: func(a backendAuth) string {
			switch {
			case a.Azure == nil:
				return "no Azure auth"
			case !issuedTo(entra.Issued(), azureClientID, a.Azure.AccessToken):
				return "no access token the Entra ID stand-in gave " + azureClientID
			}
			token = a.Azure.AccessToken
			return ""
		},
		tokenSecret: true,
		proof:       bearer("Azure OpenAI", &token, "/openai/deployments/"+azureDeployment+"/chat/completions?api-version="+azureAPIVersion, "OpenAI's form"),
		dump:        "scenario-cloud-azure",
	})
}
