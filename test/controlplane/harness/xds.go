package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// XDSPort is Envoy Gateway's xDS server (gateway v1.8.3
// internal/xds/bootstrap/bootstrap.go, DefaultXdsServerPort), served inside
// its network namespace and forwarded to the host's loopback.
const XDSPort = 18000

// ToolXDSReader is the suite's own reader. Its cached binary is named by a
// hash of its source, so a changed reader is rebuilt.
var ToolXDSReader = Tool{Name: "xds-reader", Version: xdsReaderVersion(), module: "xds-reader",
	pkg: "github.com/modelplaneai/function-inference-gateway/test/controlplane/tools/xds-reader"}

// xdsReaderVersion hashes the reader's source files.
func xdsReaderVersion() string {
	return sourceVersion("", "xds-reader", "main.go", "decode.go", "types.go", "ratelimit.go", "extproc.go")
}

// sourceVersion names a build of a tools module of this repository's own
// source by its upstream version, if any, and a hash of its go.mod, go.sum
// and the files named, so that a change rebuilds it.
func sourceVersion(upstream, module string, files ...string) string {
	root, err := toolchain.Root()
	if err != nil {
		return "unreadable"
	}
	h := sha256.New()
	for _, f := range append([]string{"go.mod", "go.sum"}, files...) {
		b, err := os.ReadFile(filepath.Join(root, "test", "controlplane", "tools", module, f))
		if err != nil {
			return "unreadable"
		}
		h.Write(b)
	}
	v := "src-" + hex.EncodeToString(h.Sum(nil))[:12]
	if upstream != "" {
		v = upstream + "-" + v
	}
	return v
}

// writeEnvoyCerts writes the client certificate Envoy pods use, certgen's
// Secret envoy-gateway-system/envoy, signed by the CA Envoy Gateway's xDS
// server trusts (gateway v1.8.3 internal/crypto/cert_load.go).
func (c *Cluster) writeEnvoyCerts(ctx context.Context) string {
	return c.WriteCertgenSecret(ctx, "envoy", filepath.Join(c.Dir, "envoy-certs"))
}
