package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// A tool is one binary built from a tools module under tools/. Each tools
// module has its own go.mod, so that the large dependency graphs of
// Kubernetes, Crossplane and the provider never enter the function's
// go.mod, and pins its main package with a tool directive.
type tool struct {
	name    string // binary name, and the prefix of its cached file
	version string // the upstream version the tools module pins
	module  string // folder under tools/
	pkg     string // main package
	ldflags string
}

// kubeVersionFlags set the version Kubernetes binaries report. Built from
// the module cache they would report v0.0.0-master, which the API server's
// compatibility-version checks reject.
const kubeVersionFlags = "-X k8s.io/component-base/version.gitVersion=v1.36.1 " +
	"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

// The binaries the control plane runs, in the order they are built.
var (
	toolEtcd = tool{name: "etcd", version: "v3.6.8", module: "etcd", pkg: "go.etcd.io/etcd/server/v3"}

	toolAPIServer = tool{name: "kube-apiserver", version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kube-apiserver", ldflags: kubeVersionFlags}

	toolControllerManager = tool{name: "kube-controller-manager", version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", ldflags: kubeVersionFlags}

	toolProvider = tool{name: "provider-kubernetes", version: "v1.3.1", module: "provider-kubernetes",
		pkg: "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"}

	toolCrossplane = tool{name: "crossplane", version: "v2.2.0", module: "crossplane",
		pkg:     "github.com/crossplane/crossplane/v2/cmd/crossplane",
		ldflags: "-X github.com/crossplane/crossplane/v2/internal/version.version=v2.2.0"}

	toolCrane = tool{name: "crane", version: "v0.20.7", module: "crane", pkg: "github.com/google/go-containerregistry/cmd/crane"}

	// The real Envoy Gateway and AI Gateway controllers (upstream_test.go).
	// Envoy Gateway's version string is only logged; AI Gateway's is
	// written into its filter config, which nothing here compares.
	toolEnvoyGateway = tool{name: "envoy-gateway", version: "v1.8.1", module: "envoy-gateway",
		pkg: "github.com/envoyproxy/gateway/cmd/envoy-gateway"}

	toolAIGateway = tool{name: "ai-gateway-controller", version: "v1.0.0", module: "ai-gateway",
		pkg: "github.com/envoyproxy/ai-gateway/cmd/controller"}

	// kubectl is the README reader's (quickstart_test.go).
	toolKubectl = tool{name: "kubectl", version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kubectl", ldflags: kubeVersionFlags}

	allTools = []tool{toolCrane, toolEtcd, toolProvider, toolCrossplane, toolAIGateway, toolEnvoyGateway, toolAPIServer, toolControllerManager, toolXDSReader, toolKubectl, toolCertManager}
)

// buildMu keeps two builds from this test binary from running at once: on
// two cores a second concurrent build only slows the first one down.
var buildMu sync.Mutex

// buildTool returns the path of t's binary under bin/controlplane at the
// repository root, building it first if it is not there.
func buildTool(ctx context.Context, tb testing.TB, root string, t tool) string {
	tb.Helper()
	out := filepath.Join(root, "bin", "controlplane", t.name+"-"+t.version)
	if _, err := os.Stat(out); err == nil {
		tb.Logf("build %s %s: cached at %s", t.name, t.version, out)
		return out
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	var args []string
	if t.ldflags != "" {
		args = append(args, "-ldflags", t.ldflags)
	}
	start := time.Now()
	if err := toolchain.Build(ctx, filepath.Join(root, "test", "controlplane", "tools", t.module), out, append(args, t.pkg)...); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("build %s %s: built in %s", t.name, t.version, time.Since(start).Round(time.Second))
	return out
}

// moduleDir returns the folder of module@version in the module cache,
// downloading it if need be. It runs in an empty folder outside any module,
// so it never touches a go.mod or go.sum; the checksum database still
// verifies the download.
func moduleDir(ctx context.Context, tb testing.TB, module, version string) string {
	tb.Helper()
	dirs, err := toolchain.ModuleDirs(ctx, tb.TempDir(), module+"@"+version)
	if err != nil {
		tb.Fatal(err)
	}
	return dirs[module+"@"+version]
}

// tail returns the last n lines of a file, for failure reports.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestBuildBinaries only builds (or finds cached) every binary the control
// plane runs. .ci/run starts it beside the README's test command, so that
// a cold machine builds the control plane while the fast tests run, and
// the control-plane suite then finds every binary cached.
func TestBuildBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the control plane's binaries")
	}
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	buildAll(t.Context(), t, root)
}
