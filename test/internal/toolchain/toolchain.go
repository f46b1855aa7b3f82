// Package toolchain builds the real tools the tests drive: the crossplane
// CLI from the pinned tools module in test/tools, and this function's own
// binary. Each is built once per version into bin/ at the repository root,
// and reused after that.
package toolchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// CrossplaneVersion is the crossplane CLI version pinned in test/tools/go.mod.
const CrossplaneVersion = "v2.2.0"

// ProviderKubernetesVersion is the provider-kubernetes the control-plane
// suite runs by default (test/controlplane, toolProvider), and so the one
// deploy/control-plane installs.
const ProviderKubernetesVersion = "v1.4.1"

// Root returns the repository root: the folder holding the function's go.mod.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot find the repository root")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// CrossplanePath returns where Crossplane builds the CLI, without building
// it, and whether it is there already.
func CrossplanePath() (path string, built bool, err error) {
	root, err := Root()
	if err != nil {
		return "", false, err
	}
	path = filepath.Join(root, "bin", "crossplane-"+CrossplaneVersion)
	_, err = os.Stat(path)
	return path, err == nil, nil
}

var (
	xpOnce sync.Once
	xpPath string
	xpErr  error
)

// Crossplane returns the path of the crossplane CLI, building it from the
// tools module the first time (about 3 minutes cold, seconds warm). The
// build goes to a temporary name and is renamed into place, so test
// processes of several packages that build at once never see half a file.
func Crossplane() (string, error) {
	xpOnce.Do(func() {
		var built bool
		xpPath, built, xpErr = CrossplanePath()
		if xpErr != nil || built {
			return
		}
		root := filepath.Dir(filepath.Dir(xpPath))
		xpErr = Build(context.Background(), filepath.Join(root, "test", "tools"), xpPath,
			"-ldflags", "-X github.com/crossplane/crossplane/v2/internal/version.version="+CrossplaneVersion,
			"github.com/crossplane/crossplane/v2/cmd/crank")
	})
	return xpPath, xpErr
}

// Function builds this function's binary into dir and returns its path.
// flags are extra go build flags, such as -overlay.
func Function(dir string, flags ...string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "function-inference-gateway")
	return out, Build(context.Background(), root, out, append(flags, "./cmd/function")...)
}

// Build runs go build args in dir, until ctx ends, the folder of the module to build from,
// writing to a temporary file beside out and renaming it into place, so
// that test processes building at once never see half a binary. GOWORK is
// off: a go.work somewhere above must not mix another module's build list
// into this one's.
func Build(ctx context.Context, dir, out string, args ...string) error {
	return BuildEnv(ctx, nil, dir, out, args...)
}

// BuildEnv is Build with env added to the go command's environment, such
// as a GOTOOLCHAIN for a module whose go line is newer than the machine's
// Go.
func BuildEnv(ctx context.Context, env []string, dir, out string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".build-*")
	if err != nil {
		return err
	}
	_ = tmp.Close()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", tmp.Name()}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cannot build %s in %s: %w\n%s", args[len(args)-1], dir, err, b)
	}
	return os.Rename(tmp.Name(), out)
}

// ModuleDirs returns the module cache folder of each module@version, as
// `go mod download -json` reports it (field Dir), downloading any module
// not cached yet. It runs in dir, a folder of the module whose Go settings
// (GOPROXY, GOFLAGS, go.sum) should apply; with exact versions named, go
// mod download changes neither go.mod nor go.sum.
func ModuleDirs(ctx context.Context, dir string, modules ...string) (map[string]string, error) {
	return ModuleDirsEnv(ctx, nil, dir, modules...)
}

// ModuleDirsEnv is ModuleDirs with env added to the go command's
// environment: go mod download refuses a module whose go line is newer
// than the running Go unless GOTOOLCHAIN names one at least as new.
func ModuleDirsEnv(ctx context.Context, env []string, dir string, modules ...string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"mod", "download", "-json"}, modules...)...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	// go mod download -json prints one JSON object per module, with Error
	// set for a module it could not download, and then exits non-zero.
	dirs := map[string]string{}
	var errs []error
	dec := json.NewDecoder(&stdout)
	for {
		var m struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("cannot parse the output of go mod download -json: %w", err)
		}
		if m.Error != "" {
			errs = append(errs, fmt.Errorf("cannot download %s@%s: %s", m.Path, m.Version, m.Error))
			continue
		}
		dirs[m.Path+"@"+m.Version] = m.Dir
	}
	if runErr != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("cannot run go mod download in %s: %w: %s", dir, runErr, stderr.Bytes()))
	}
	for _, m := range modules {
		if _, ok := dirs[m]; !ok && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("cannot find %s in the output of go mod download", m))
		}
	}
	return dirs, errors.Join(errs...)
}
