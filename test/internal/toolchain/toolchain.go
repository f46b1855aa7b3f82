// Package toolchain builds the real tools the tests drive: the crossplane
// CLI from the pinned tools module in test/tools, and this function's own
// binary. Each is built once per version into bin/ at the repository root,
// and reused after that.
package toolchain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// CrossplaneVersion is the crossplane CLI version pinned in test/tools/go.mod.
const CrossplaneVersion = "v2.2.0"

// Root returns the repository root: the folder holding the function's go.mod.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot find the repository root")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
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
		root, err := Root()
		if err != nil {
			xpErr = err
			return
		}
		xpPath = filepath.Join(root, "bin", "crossplane-"+CrossplaneVersion)
		if _, err := os.Stat(xpPath); err == nil {
			return
		}
		xpErr = build(filepath.Join(root, "test", "tools"), xpPath,
			"-ldflags", "-X github.com/crossplane/crossplane/v2/internal/version.version="+CrossplaneVersion,
			"github.com/crossplane/crossplane/v2/cmd/crank")
	})
	return xpPath, xpErr
}

// Function builds this function's binary into dir and returns its path.
func Function(dir string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "function-inference-gateway")
	return out, build(root, out, "./cmd/function")
}

// build runs go build in dir, writing to a temporary file beside out and
// renaming it into place.
func build(dir, out string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".build-*")
	if err != nil {
		return err
	}
	_ = tmp.Close()
	cmd := exec.Command("go", append([]string{"build", "-o", tmp.Name()}, args...)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cannot build %s in %s: %v\n%s", args[len(args)-1], dir, err, b)
	}
	return os.Rename(tmp.Name(), out)
}
