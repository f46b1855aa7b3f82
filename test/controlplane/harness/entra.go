package harness

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// entraHost is Microsoft Entra ID's login host, the authority the Azure
// SDK's ClientSecretCredential asks for tokens (azidentity's default
// cloud, AzurePublic).
const entraHost = "login.microsoftonline.com"

// MicrosoftEntra stands in for Microsoft Entra ID, which AI Gateway's
// controller asks for an access token with an Azure service principal's
// client secret (ai-gateway v1.0.0 internal/controller/tokenprovider/
// azure_client_secret_token_provider.go, azidentity's
// ClientSecretCredential; internal/controller/rotators/
// azure_token_rotator.go). The controller reaches Azure through the proxy
// AI_GATEWAY_AZURE_PROXY_URL names (GetClientSecretCredentialOptions), so
// the stand-in is that proxy: it tunnels a CONNECT to
// login.microsoftonline.com:443, and no other, to a TLS server of its own
// with a certificate for that host from the test CA, which the controller
// trusts through SSL_CERT_FILE (Go's crypto/x509 reads it for the system
// roots on Linux).
//
// The server answers what the Microsoft Authentication Library asks of a
// trusted host (microsoft-authentication-library-for-go v1.6.0
// apps/internal/oauth/resolvers.go, openIDConfigurationEndpoint; ops/
// authority/authority.go): the tenant's OpenID configuration, and the
// token endpoint's client-credentials grant, which it grants only to a
// client ID and secret registered with Register for that tenant. It
// records each token it gives out.
type MicrosoftEntra struct {
	proxyPort int
	tlsAddr   string
	caFile    string

	mu          sync.Mutex
	secrets     map[string]string // client secret by tenant/clientID
	tokenLedger                   // Issuer: the client ID
}

// startMicrosoftEntra serves the proxy on port, and the TLS server behind
// it on another loopback port, until the test ends.
func (c *Cluster) startMicrosoftEntra(tb testing.TB, port int) *MicrosoftEntra {
	dir := filepath.Join(c.Dir, "entra")
	e := &MicrosoftEntra{proxyPort: port, secrets: map[string]string{}, tokenLedger: tokenLedger{prefix: "entra-controlplane-stand-in"}}
	e.caFile = filepath.Join(c.ca.writeDir(tb, dir, c.ca.server(tb, entraHost, entraHost)), "ca.crt")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	Must(tb, err)
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	Must(tb, err)
	e.tlsAddr = tl.Addr().String()
	login := &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = login.Serve(tl) }()
	pl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	Must(tb, err)
	proxy := &http.Server{Handler: http.HandlerFunc(e.tunnel), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(pl) }()
	tb.Cleanup(func() { _ = proxy.Close(); _ = login.Close() })
	return e
}

// ProxyURL is what AI_GATEWAY_AZURE_PROXY_URL is set to.
func (e *MicrosoftEntra) ProxyURL() string { return fmt.Sprintf("http://127.0.0.1:%d", e.proxyPort) }

// Register grants tokens to the client ID with secret in tenant.
func (e *MicrosoftEntra) Register(tenant, clientID, secret string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets[tenant+"/"+clientID] = secret
}

// tunnel is the proxy: a CONNECT to Entra's host is joined to the TLS
// server; anything else is refused.
func (e *MicrosoftEntra) tunnel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect || r.Host != entraHost+":443" {
		http.Error(w, "this proxy only tunnels to "+entraHost+":443", http.StatusForbidden)
		return
	}
	up, err := net.Dial("tcp", e.tlsAddr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	// Bytes the client sent after its CONNECT, already buffered.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Peek(n)
		_, _ = up.Write(b)
	}
	go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
	_, _ = io.Copy(down, up)
	_ = down.Close()
}

// serve answers the OpenID configuration and the token endpoint of a
// tenant, /<tenant>/v2.0/.well-known/openid-configuration and
// /<tenant>/oauth2/v2.0/token.
func (e *MicrosoftEntra) serve(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	if len(parts) != 2 {
		reply(http.StatusNotFound, map[string]string{"error": "not_found"})
		return
	}
	tenant, rest := parts[0], parts[1]
	base := "https://" + entraHost + "/" + tenant
	switch {
	case r.Method == http.MethodGet && rest == "v2.0/.well-known/openid-configuration":
		reply(http.StatusOK, map[string]any{
			"authorization_endpoint": base + "/oauth2/v2.0/authorize",
			"token_endpoint":         base + "/oauth2/v2.0/token",
			"issuer":                 base + "/v2.0",
		})
	case r.Method == http.MethodPost && rest == "oauth2/v2.0/token":
		if err := r.ParseForm(); err != nil {
			reply(http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": err.Error()})
			return
		}
		f := r.PostForm
		e.mu.Lock()
		want, known := e.secrets[tenant+"/"+f.Get("client_id")]
		e.mu.Unlock()
		switch {
		case f.Get("grant_type") != "client_credentials":
			reply(http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
			return
		case !known || f.Get("client_secret") != want:
			reply(http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client or wrong secret"})
			return
		}
		token := e.issue(f.Get("client_id"), f.Get("scope"))
		reply(http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token})
	default:
		reply(http.StatusNotFound, map[string]string{"error": "not_found", "error_description": r.Method + " " + r.URL.Path})
	}
}
