package harness

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// GoogleTokens stands in for Google's OAuth 2.0 token endpoint, the one
// part of Google Cloud that AI Gateway's controller calls for a GCP
// service account key: it exchanges a JWT the key signs for an access
// token (RFC 7523), and writes the token where the gateway's ext_proc
// reads it (ai-gateway v1.0.0 internal/controller/tokenprovider/
// gcp_token_provider.go, golang.org/x/oauth2/google's JWT flow;
// internal/controller/rotators/gcp_token_rotator.go). A key's JSON names
// the endpoint in token_uri (golang.org/x/oauth2 google/google.go,
// credentialsFile.jwtConfig), so a key that names this one reaches it from
// AI Gateway's network namespace (StartAIGateway dials its port).
//
// It answers only a JWT signed by a key registered with Register, for the
// audience of its own URL, and records each token it gives out.
type GoogleTokens struct {
	port int

	mu   sync.Mutex
	keys map[string]*rsa.PublicKey // by the service account's email, the JWT's issuer
	tokenLedger
}

// IssuedToken is one access token a stand-in gave out.
type IssuedToken struct {
	Issuer, Scope, Token string
	At                   time.Time
}

// tokenLedger gives out a stand-in's access tokens and remembers them.
type tokenLedger struct {
	mu     sync.Mutex
	prefix string
	issued []IssuedToken
}

// issue gives issuer a new token for scope.
func (l *tokenLedger) issue(issuer, scope string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	token := fmt.Sprintf("%s-%d", l.prefix, len(l.issued)+1)
	l.issued = append(l.issued, IssuedToken{Issuer: issuer, Scope: scope, Token: token, At: time.Now()})
	return token
}

// Issued returns the tokens given out so far.
func (l *tokenLedger) Issued() []IssuedToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]IssuedToken(nil), l.issued...)
}

// startGoogleTokens serves the stand-in on a free loopback port until the
// test ends.
func startGoogleTokens(tb testing.TB, port int) *GoogleTokens {
	g := &GoogleTokens{port: port, keys: map[string]*rsa.PublicKey{}, tokenLedger: tokenLedger{prefix: "ya29.controlplane-stand-in"}}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	Must(tb, err)
	srv := &http.Server{Handler: http.HandlerFunc(g.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return g
}

// URL is the token endpoint a service account key names in token_uri.
func (g *GoogleTokens) URL() string { return fmt.Sprintf("http://127.0.0.1:%d/token", g.port) }

// Register trusts pub for JWTs issued by the service account email.
func (g *GoogleTokens) Register(email string, pub *rsa.PublicKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys[email] = pub
}

// serve answers one token request, as Google's endpoint does: the form's
// grant_type is the JWT bearer grant and its assertion a JWT signed with
// RS256 by the issuer's key, for this endpoint's URL, not expired.
func (g *GoogleTokens) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, why string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": why})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/token" {
		fail(http.StatusNotFound, "POST /token only")
		return
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		fail(http.StatusBadRequest, "unsupported grant_type "+gt)
		return
	}
	tok, err := jwt.ParseSigned(r.PostForm.Get("assertion"), []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		fail(http.StatusBadRequest, "cannot parse the assertion: "+err.Error())
		return
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	g.mu.Lock()
	pub := g.keys[unverified.Issuer]
	g.mu.Unlock()
	if pub == nil {
		fail(http.StatusBadRequest, "no key registered for "+unverified.Issuer)
		return
	}
	var claims jwt.Claims
	var extra struct {
		Scope string `json:"scope"`
	}
	if err := tok.Claims(pub, &claims, &extra); err != nil {
		fail(http.StatusBadRequest, "the assertion is not signed by "+unverified.Issuer+"'s key: "+err.Error())
		return
	}
	if err := claims.Validate(jwt.Expected{Issuer: unverified.Issuer, AnyAudience: jwt.Audience{g.URL()}, Time: time.Now()}); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	token := g.issue(claims.Issuer, extra.Scope)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 3600, "token_type": "Bearer"})
}
