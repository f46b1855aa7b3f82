package harness

// certManagerVersion is the cert-manager the suite runs and validates
// against: the version of the main module in go.mod and in the
// cert-manager tools module.
const certManagerVersion = "v1.21.2"

// toolCertManager is cert-manager's controllers, built from its main
// module by a small main of this repository (tools/cert-manager/main.go
// says why: the upstream controller binary is a module the proxy does not
// serve).
var toolCertManager = Tool{Name: "cert-manager-controller", Version: sourceVersion(certManagerVersion, "cert-manager", "main.go"),
	module: "cert-manager", pkg: "github.com/modelplaneai/function-inference-gateway/test/controlplane/tools/cert-manager"}

// StartCertManager runs cert-manager's controllers against the gateway
// cluster (the same API server here) with the admin kubeconfig, as
// cert-manager's own ServiceAccount would. It binds no port: the tools
// main starts no metrics, healthz or webhook server.
func (c *Cluster) StartCertManager() {
	c.tb.Helper()
	c.Procs.Start("cert-manager", nil, c.Bins[toolCertManager.Name],
		"--kubeconfig", c.Kubeconfig, "--cluster-resource-namespace", "cert-manager")
}
