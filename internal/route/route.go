// Package route composes a ModelRoute.
package route

import (
	"github.com/crossplane/function-sdk-go/errors"

	"github.com/modelplaneai/function-inference-gateway/internal/compose"
)

// Kind is the composite kind this package composes.
const Kind = "ModelRoute"

// Composer composes ModelRoutes.
type Composer struct{}

// Compose is not written yet.
func (Composer) Compose(compose.Request) (*compose.Result, error) {
	return nil, errors.New("cannot compose ModelRoute yet")
}
