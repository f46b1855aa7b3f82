// Package gosdk is a stand-in for the Nebius Go SDK: it has the constructors
// provider-kubernetes v1.3.1 calls, and New always fails, so a
// ProviderConfig that asks for Nebius credentials gets a clear error instead
// of a token.
package gosdk

import (
	"context"
	"errors"

	"github.com/nebius/gosdk/auth"
)

// Credentials are the credentials an SDK would use.
type Credentials struct {
	parser *auth.PrivateKeyParser
}

// Option configures New.
type Option func(*SDK)

// SDK would mint Nebius IAM tokens; this one never does.
type SDK struct {
	creds Credentials
}

// ServiceAccountReader wraps a service account's authorized key.
func ServiceAccountReader(p *auth.PrivateKeyParser) Credentials {
	return Credentials{parser: p}
}

// WithCredentials sets the credentials.
func WithCredentials(c Credentials) Option {
	return func(s *SDK) { s.creds = c }
}

// New always fails: this build has no Nebius SDK.
func New(_ context.Context, opts ...Option) (*SDK, error) {
	s := &SDK{}
	for _, o := range opts {
		o(s)
	}
	return nil, errors.New("cannot use Nebius credentials: this provider-kubernetes build has a stub in place of github.com/nebius/gosdk")
}

// BearerToken always fails.
func (s *SDK) BearerToken(context.Context) (auth.BearerToken, error) {
	return auth.BearerToken{}, errors.New("cannot mint a Nebius IAM token: stub SDK")
}
