// Package auth holds the few Nebius auth types provider-kubernetes v1.3.1
// names. Nothing here can authenticate.
package auth

// BearerToken is an IAM token.
type BearerToken struct {
	// Token is the bearer token itself.
	Token string
}

// PrivateKeyParser holds a service account's authorized key.
type PrivateKeyParser struct {
	privateKey       []byte
	publicKeyID      string
	serviceAccountID string
}

// NewPrivateKeyParser keeps a service account's authorized key.
func NewPrivateKeyParser(privateKey []byte, publicKeyID, serviceAccountID string) *PrivateKeyParser {
	return &PrivateKeyParser{privateKey: privateKey, publicKeyID: publicKeyID, serviceAccountID: serviceAccountID}
}
