package e2e

// These tests build the function from the module's source with go build,
// which the go command's test cache cannot see: without this import a
// change of the function's source alone would not change this test
// binary, and go test could report a cached result of another function.
import _ "github.com/modelplaneai/function-inference-gateway/fn"
