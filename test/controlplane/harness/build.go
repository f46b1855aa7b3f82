package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// A Tool is one binary built from a tools module under tools/. Each tools
// module has its own go.mod, so that the large dependency graphs of
// Kubernetes, Crossplane and the provider never enter the function's
// go.mod, and pins its main package with a tool directive.
type Tool struct {
	Name    string // binary name, and the prefix of its cached file
	Version string // the upstream version the tools module pins
	module  string // folder under tools/
	pkg     string // main package
	ldflags string
	// goToolchain, when set, is the GOTOOLCHAIN the go command runs with
	// for this tool, its build and the download of its module: the tool's
	// go line is newer than the Go the function itself needs.
	goToolchain string
	// versionFlags, when set, make the binary print its version alone:
	// buildTool checks it is version, since the linker ignores an -X of a
	// variable that does not exist.
	versionFlags []string
	// edits are source changes made only in this build, in a copy of the
	// module (editedModules): the module cache stays as downloaded.
	edits []sourceEdit
	// variant, when set, names a build with edits of its own (a
	// deliberate break), cached beside the plain one.
	variant string
}

// File is the name of t's binary under bin/controlplane.
func (t Tool) File() string {
	if t.variant == "" {
		return t.Name + "-" + t.Version
	}
	return t.Name + "-" + t.Version + "-" + t.variant
}

// A sourceEdit replaces old, which must occur exactly once, by new in one
// file of a module, for one build.
type sourceEdit struct {
	module, version, file string
	old, new              string
}

// apply returns src with the edit made, or an error when old is not in it
// exactly once: the upstream file changed.
func (e sourceEdit) apply(src []byte) ([]byte, error) {
	if n := strings.Count(string(src), e.old); n != 1 {
		return nil, fmt.Errorf("cannot edit %s@%s %s: want %q once, found it %d times", e.module, e.version, e.file, e.old, n)
	}
	return []byte(strings.Replace(string(src), e.old, e.new, 1)), nil
}

// goEnv is the environment the go command needs for t.
func (t Tool) goEnv() []string {
	if t.goToolchain == "" {
		return nil
	}
	return []string{"GOTOOLCHAIN=" + t.goToolchain}
}

// kubeVersionFlags set the version Kubernetes binaries report. Built from
// the module cache they would report v0.0.0-master, which the API server's
// compatibility-version checks reject.
const kubeVersionFlags = "-X k8s.io/component-base/version.gitVersion=v1.36.1 " +
	"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

// The binaries the control plane runs, in the order they are built.
var (
	toolEtcd = Tool{Name: "etcd", Version: "v3.6.8", module: "etcd", pkg: "go.etcd.io/etcd/server/v3"}

	toolAPIServer = Tool{Name: "kube-apiserver", Version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kube-apiserver", ldflags: kubeVersionFlags}

	toolControllerManager = Tool{Name: "kube-controller-manager", Version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", ldflags: kubeVersionFlags}

	// The newest served pair, the default. provider-kubernetes v1.4.1
	// needs Go 1.27.1 (its go.mod). Two of its dependencies are pinned at
	// versions the Go module proxy refuses (crossplane-runtime/v2
	// v2.5.0-rc.0.0.20260922181840-9d02af3667a0 and crossplane/apis/v2
	// v2.4.1), so tools/provider-kubernetes/go.mod replaces them with
	// v2.4.0 of each; the one thing v1.4.1 uses that v2.4.0 lacks is
	// controller.Options.Groups, which cmd/provider/main.go sets only on
	// the SafeStart CRD gate, and the edits below drop (crossplane-runtime
	// v2.4.0 pkg/reconciler/customresourcesgate Setup has no such option:
	// its gate reconciles every CRD).
	toolProvider = Tool{Name: "provider-kubernetes", Version: toolchain.ProviderKubernetesVersion, module: "provider-kubernetes",
		pkg: "github.com/crossplane-contrib/provider-kubernetes/cmd/provider", goToolchain: "go1.27.3",
		edits: []sourceEdit{
			{module: "github.com/crossplane-contrib/provider-kubernetes", version: "v1.4.1", file: "cmd/provider/main.go",
				old: "\tobjectv1alpha1namespaced \"github.com/crossplane-contrib/provider-kubernetes/apis/namespaced/object/v1alpha1\"\n",
				new: "\t_ \"github.com/crossplane-contrib/provider-kubernetes/apis/namespaced/object/v1alpha1\"\n"},
			{module: "github.com/crossplane-contrib/provider-kubernetes", version: "v1.4.1", file: "cmd/provider/main.go",
				old: "\t\t\tGroups:                  []string{objectv1alpha1namespaced.Group, objectv1alpha1cluster.Group},\n",
				new: ""},
		}}

	// Crossplane checks a package's crossplane.version constraint against
	// its own version, which v2.3.0 keeps in crossplane-runtime (v2.3.0
	// nix/build.nix sets it there; v2.2.0 kept it in internal/version).
	toolCrossplane = Tool{Name: "crossplane", Version: "v2.3.0", module: "crossplane",
		pkg:          "github.com/crossplane/crossplane/v2/cmd/crossplane",
		ldflags:      "-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=v2.3.0",
		versionFlags: []string{"--version"}}

	// The older pair, CONTROLPLANE_CONTROLLERS=older.
	toolProviderV13 = Tool{Name: "provider-kubernetes", Version: "v1.3.1", module: "provider-kubernetes-v1.3",
		pkg: "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"}

	toolCrossplaneV22 = Tool{Name: "crossplane", Version: "v2.2.0", module: "crossplane-v2.2",
		pkg:          "github.com/crossplane/crossplane/v2/cmd/crossplane",
		ldflags:      "-X github.com/crossplane/crossplane/v2/internal/version.version=v2.2.0",
		versionFlags: []string{"--version"}}

	toolCrane = Tool{Name: "crane", Version: "v0.20.7", module: "crane", pkg: "github.com/google/go-containerregistry/cmd/crane"}

	// The real Envoy Gateway and AI Gateway controllers (upstream.go).
	// Envoy Gateway's version string is only logged; AI Gateway's is
	// written into its filter config, which nothing here compares.
	toolEnvoyGateway = Tool{Name: "envoy-gateway", Version: "v1.8.3", module: "envoy-gateway",
		pkg: "github.com/envoyproxy/gateway/cmd/envoy-gateway"}

	toolAIGateway = Tool{Name: "ai-gateway-controller", Version: "v1.0.0", module: "ai-gateway",
		pkg: aiGatewayModule + "/cmd/controller"}

	// ToolExtProc is AI Gateway's external processor, the binary of its
	// sidecar image (ExtProcImage), from the same pinned module as its
	// controller. No Envoy runs here; scenario 5k plays Envoy to it
	// (xds-reader -ext-proc) with the filter config the controller wrote.
	ToolExtProc = Tool{Name: "ai-gateway-extproc", Version: "v1.0.0", module: "ai-gateway",
		pkg: aiGatewayModule + "/cmd/extproc"}

	// kubectl is the README reader's (the suite's quickstart_test.go).
	ToolKubectl = Tool{Name: "kubectl", Version: "v1.36.1", module: "kubernetes",
		pkg: "k8s.io/kubernetes/cmd/kubectl", ldflags: kubeVersionFlags}
)

// aiGatewayModule is AI Gateway's Go module.
const aiGatewayModule = "github.com/envoyproxy/ai-gateway"

// Controllers is a Crossplane and the provider-kubernetes the suite runs
// beside it.
type Controllers struct {
	name       string // the value of controllersEnv that picks the pair
	crossplane Tool
	provider   Tool
	// aiGateway, when set, replaces the plain AI Gateway controller
	// (WithAIGatewayEdit).
	aiGateway *Tool
}

// WithAIGatewayEdit returns p with AI Gateway's controller built from its
// pinned module with old replaced by replacement in file (a path in the
// module): a deliberate break of the upstream behaviour a check relies on,
// built and cached as a variant of its own, so the plain build stays as
// it is.
func (p Controllers) WithAIGatewayEdit(variant, file, old, replacement string) Controllers {
	t := toolAIGateway
	// The edit's hash in the name: a changed edit is built anew, not
	// taken from the cache.
	sum := sha256.Sum256([]byte(file + "\x00" + old + "\x00" + replacement))
	t.variant = variant + "-" + hex.EncodeToString(sum[:4])
	t.edits = []sourceEdit{{module: aiGatewayModule, version: t.Version, file: file, old: old, new: replacement}}
	p.aiGateway = &t
	return p
}

// CheckAIGatewayEdit fails tb unless old occurs exactly once in file of
// AI Gateway's pinned module, as WithAIGatewayEdit needs: a break whose
// upstream source moved on fails in every run, not only when it runs.
func CheckAIGatewayEdit(ctx context.Context, tb testing.TB, file, old string) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(moduleDir(ctx, tb, aiGatewayModule, toolAIGateway.Version), filepath.FromSlash(file)))
	if err != nil {
		tb.Fatalf("cannot read %s@%s %s: %v", aiGatewayModule, toolAIGateway.Version, file, err)
	}
	e := sourceEdit{module: aiGatewayModule, version: toolAIGateway.Version, file: file, old: old}
	if _, err := e.apply(b); err != nil {
		tb.Fatal(err)
	}
}

// aiGatewayTool is the AI Gateway controller p runs.
func (p Controllers) aiGatewayTool() Tool {
	if p.aiGateway != nil {
		return *p.aiGateway
	}
	return toolAIGateway
}

// controllersEnv names the environment variable that picks the pair:
// unset for the newest served pair, "older" for the one before.
const controllersEnv = "CONTROLPLANE_CONTROLLERS"

var (
	newestControllers = Controllers{name: "newest", crossplane: toolCrossplane, provider: toolProvider}
	olderControllers  = Controllers{name: "older", crossplane: toolCrossplaneV22, provider: toolProviderV13}
)

// selectedControllers returns the pair controllersEnv picks.
func selectedControllers() (Controllers, error) {
	switch v := os.Getenv(controllersEnv); v {
	case "", newestControllers.name:
		return newestControllers, nil
	case olderControllers.name:
		return olderControllers, nil
	default:
		return Controllers{}, fmt.Errorf("cannot use %s=%q: want %q, or unset for Crossplane %s and provider-kubernetes %s",
			controllersEnv, v, olderControllers.name, newestControllers.crossplane.Version, newestControllers.provider.Version)
	}
}

// MustControllers is selectedControllers for a test.
func MustControllers(tb testing.TB) Controllers {
	tb.Helper()
	p, err := selectedControllers()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// String names the pair's versions, for logs.
func (p Controllers) String() string {
	s := fmt.Sprintf("Crossplane %s and provider-kubernetes %s (%s=%s)",
		p.crossplane.Version, p.provider.Version, controllersEnv, p.name)
	if p.aiGateway != nil {
		s += fmt.Sprintf(", AI Gateway %s edited (%s)", p.aiGateway.Version, p.aiGateway.variant)
	}
	return s
}

// ToolsFor returns every binary a control plane with pair p runs, in the
// order they are built: only the selected pair's Crossplane and provider.
func ToolsFor(p Controllers) []Tool {
	return []Tool{toolCrane, toolEtcd, p.provider, p.crossplane, p.aiGatewayTool(), toolEnvoyGateway, toolAPIServer, toolControllerManager, ToolXDSReader, ToolKubectl, toolCertManager, ToolRateLimit, ToolExtProc}
}

// BuildMu keeps two builds from this test binary from running at once: on
// two cores a second concurrent build only slows the first one down.
var BuildMu sync.Mutex

// buildTool returns the path of t's binary under bin/controlplane at the
// repository root, building it first if it is not there.
func buildTool(ctx context.Context, tb testing.TB, root string, t Tool) string {
	tb.Helper()
	out := filepath.Join(root, "bin", "controlplane", t.File())
	if _, err := os.Stat(out); err == nil {
		tb.Logf("build %s %s: cached at %s", t.Name, t.Version, out)
		checkVersion(ctx, tb, t, out)
		return out
	}
	BuildMu.Lock()
	defer BuildMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		checkVersion(ctx, tb, t, out)
		return out
	}
	var args []string
	if t.ldflags != "" {
		args = append(args, "-ldflags", t.ldflags)
	}
	moduleRoot := filepath.Join(root, "test", "controlplane", "tools", t.module)
	if len(t.edits) > 0 {
		args = append(args, "-modfile="+editedModules(ctx, tb, t, moduleRoot))
	}
	start := time.Now()
	if err := toolchain.BuildEnv(ctx, t.goEnv(), moduleRoot, out, append(args, t.pkg)...); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("build %s %s: built in %s", t.Name, t.Version, time.Since(start).Round(time.Second))
	checkVersion(ctx, tb, t, out)
	return out
}

// checkVersion fails tb if bin, built for t, does not report t's version
// (only for a tool with versionFlags).
func checkVersion(ctx context.Context, tb testing.TB, t Tool, bin string) {
	tb.Helper()
	if len(t.versionFlags) == 0 {
		return
	}
	b, err := exec.CommandContext(ctx, bin, t.versionFlags...).Output()
	if err != nil {
		tb.Fatalf("cannot run %s %s: %v", bin, strings.Join(t.versionFlags, " "), err)
	}
	if got := strings.TrimSpace(string(b)); got != t.Version {
		tb.Fatalf("%s reports version %q, want %q: its -ldflags set no version (delete it to rebuild once they do)", bin, got, t.Version)
	}
}

// editedModules copies each module t edits out of the module cache into a
// temporary folder, makes the edits there, and returns a -modfile for the
// build: the tools module's go.mod and go.sum beside it, with a replace of
// each module by its edited copy. (go build -overlay refuses to replace
// files in the module cache.) An edit whose old text is not in the file
// exactly once fails the build: the upstream file changed.
func editedModules(ctx context.Context, tb testing.TB, t Tool, moduleRoot string) string {
	tb.Helper()
	dir := tb.TempDir()
	copies := map[string]string{} // module path -> edited copy
	var replaces []string
	for _, e := range t.edits {
		cp, ok := copies[e.module]
		if !ok {
			cp = filepath.Join(dir, "src", fmt.Sprint(len(copies)))
			if err := os.CopyFS(cp, os.DirFS(moduleDir(ctx, tb, e.module, e.version, t.goEnv()...))); err != nil {
				tb.Fatalf("cannot copy %s@%s to edit it: %v", e.module, e.version, err)
			}
			copies[e.module] = cp
			replaces = append(replaces, fmt.Sprintf("replace %s => %s\n", e.module, cp))
		}
		f := filepath.Join(cp, filepath.FromSlash(e.file))
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatalf("cannot read %s@%s %s to edit it: %v", e.module, e.version, e.file, err)
		}
		edited, err := e.apply(b)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(f, edited, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(moduleRoot, "go.sum"))
	if err != nil {
		tb.Fatal(err)
	}
	modfile := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(modfile, append(gomod, "\n"+strings.Join(replaces, "")...), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644); err != nil {
		tb.Fatal(err)
	}
	return modfile
}

// moduleDir returns the folder of module@version in the module cache,
// downloading it if need be. It runs in an empty folder outside any module,
// so it never touches a go.mod or go.sum; the checksum database still
// verifies the download. env is added to the go command's environment (a
// GOTOOLCHAIN: tool.goEnv).
func moduleDir(ctx context.Context, tb testing.TB, module, version string, env ...string) string {
	tb.Helper()
	dirs, err := toolchain.ModuleDirsEnv(ctx, env, tb.TempDir(), module+"@"+version)
	if err != nil {
		tb.Fatal(err)
	}
	return dirs[module+"@"+version]
}

// Tail returns the last n lines of a file, for failure reports.
func Tail(path string, n int) string {
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
