package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/controlplane/harness"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// previousRevision is the last commit of the function that named every
// backend's objects <route>-<backend> (before internal/names/backend.go):
// the function users upgrade from.
const previousRevision = "8c3c397f79792adb5810192ac55b1639859a355b"

// buildPreviousFunction builds the function at previousRevision from the
// repository's own history (git archive, so the working tree is never
// touched), cached under bin/controlplane like the other binaries. A clone
// without that history (a shallow one) cannot: the function is then built
// from this tree with the naming it had then (legacyNamesOverlay), which
// is the part of it that the scenario upgrades from.
func buildPreviousFunction(ctx context.Context, tb testing.TB, root string) string {
	tb.Helper()
	out := filepath.Join(root, "bin", "controlplane", "function-"+previousRevision[:12])
	if _, err := os.Stat(out); err == nil {
		tb.Logf("build the function at %s: cached at %s", previousRevision[:12], out)
		return out
	}
	harness.BuildMu.Lock()
	defer harness.BuildMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	start := time.Now()
	src := tb.TempDir()
	if err := archiveAt(ctx, root, previousRevision, src); err != nil {
		tb.Logf("cannot read the function at %s from the repository's history (%v); building this tree with the backend names it gave instead", previousRevision[:12], err)
		bin, err := toolchain.Function(tb.TempDir(), legacyNamesOverlay(tb, root))
		if err != nil {
			tb.Fatalf("cannot build the function with the backend names of %s: %v", previousRevision[:12], err)
		}
		return bin
	}
	if err := toolchain.Build(ctx, src, out, "./cmd/function"); err != nil {
		tb.Fatalf("cannot build the function at %s: %v", previousRevision, err)
	}
	tb.Logf("build the function at %s: built in %s", previousRevision[:12], time.Since(start).Round(time.Second))
	return out
}

// archiveAt extracts the repository root's tree at rev into dir.
func archiveAt(ctx context.Context, root, rev, dir string) error {
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := extract.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return extract.Wait()
}

// legacyNamesOverlay is the go build flag of an overlay of
// internal/names/backend.go under which every backend's objects have the
// names the function gave before (<route>-<backend>) and none is renamed.
func legacyNamesOverlay(tb testing.TB, root string) string {
	tb.Helper()
	src := filepath.Join(root, "internal", "names", "backend.go")
	body, err := os.ReadFile(src)
	harness.Must(tb, err)
	s := string(body)
	for _, e := range []edit{
		{old: "func BackendObject(route, backend string) string {\n", new: "func BackendObject(route, backend string) string {\n\treturn LegacyBackendObject(route, backend)\n"},
		{old: "func BackendCA(route, backend string) string {\n", new: "func BackendCA(route, backend string) string {\n\treturn LegacyBackendCA(route, backend)\n"},
		{old: "func BackendRenamed(route, backend string) bool {\n", new: "func BackendRenamed(route, backend string) bool {\n\treturn false\n"},
	} {
		if strings.Count(s, e.old) != 1 {
			tb.Fatalf("cannot give the function its former backend names: %q is not in %s once", e.old, src)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	dir := tb.TempDir()
	broken := filepath.Join(dir, "backend.go")
	harness.WriteFile(tb, broken, []byte(s))
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {src: broken}})
	harness.Must(tb, err)
	path := filepath.Join(dir, "overlay.json")
	harness.WriteFile(tb, path, ov)
	return "-overlay=" + path
}

// TestLegacyNamesOverlayCompiles builds the function with the former
// backend names, which scenario 5b3 upgrades from in a clone without the
// repository's history, so that the fallback never goes stale unseen.
func TestLegacyNamesOverlayCompiles(t *testing.T) {
	root, err := toolchain.Root()
	harness.Must(t, err)
	if _, err := toolchain.Function(t.TempDir(), legacyNamesOverlay(t, root)); err != nil {
		t.Errorf("cannot build the function with its former backend names: %v", err)
	}
}
