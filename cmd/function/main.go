// Command function serves function-inference-gateway, a Crossplane
// composition function, over gRPC.
package main

import (
	"github.com/alecthomas/kong"

	"github.com/crossplane/function-sdk-go"

	"github.com/modelplaneai/function-inference-gateway/fn"
)

// CLI holds the command-line flags.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network            string `default:"tcp"   help:"Network on which to listen for gRPC connections."`
	Address            string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir        string `env:"TLS_SERVER_CERTS_DIR" help:"Directory holding ca.crt, tls.crt and tls.key for mTLS."`
	Insecure           bool   `help:"Serve without mTLS; --tls-certs-dir is then ignored. For crossplane render only."`
	MaxRecvMessageSize int    `default:"4"     help:"Maximum size of a received message, in MB."`
}

// Run serves the function until it fails.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	return function.Serve(fn.New(log).Wire(),
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024))
}

func main() {
	ctx := kong.Parse(&CLI{},
		kong.Name("function-inference-gateway"),
		kong.Description("A Crossplane composition function that serves LLMs behind Envoy AI Gateway: it composes InferenceGateways and ModelRoutes."))
	ctx.FatalIfErrorf(ctx.Run())
}
