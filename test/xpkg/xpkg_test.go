// Package xpkg tests the Crossplane package build in test/tools/xpkg, and
// that the Dockerfile builds the same binary the same way.
//
// The package and runtime image are Docker-format image tarballs; the tests
// read them with archive/tar, compress/gzip and encoding/json rather than
// go-containerregistry, which this module doesn't depend on.
package xpkg

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// The tests build for this machine's kind of Linux only: it's the one whose
// binary they can run, and one architecture is enough to show the build is
// reproducible. The Makefile's xpkg target builds arm64 too.
const arch = "amd64"

func TestPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the function and its package twice")
	}
	root := repoRoot(t)
	xp, err := toolchain.Crossplane()
	if err != nil {
		t.Fatalf("toolchain.Crossplane(): %v", err)
	}

	// Two builds into two folders: reproducible means the second build,
	// from a warm Go cache, writes the same bytes as the first.
	first := build(t, root, xp, t.TempDir())
	second := build(t, root, xp, t.TempDir())

	t.Run("Reproducible", func(t *testing.T) {
		if diff := cmp.Diff(first.digests(), second.digests()); diff != "" {
			t.Errorf("two builds' digests differ: -first, +second:\n%s", diff)
		}
		if diff := cmp.Diff(first.fileHashes(t), second.fileHashes(t)); diff != "" {
			t.Errorf("two builds' files differ: -first, +second:\n%s", diff)
		}
	})

	rt := readImage(t, first.path(t, "image"))
	pkg := readImage(t, first.path(t, "package"))

	t.Run("Layout", func(t *testing.T) {
		cases := map[string]struct {
			reason string
			img    *image
			want   layout
		}{
			"RuntimeImage": {
				reason: "The runtime image is the static binary alone, run as nonroot on Crossplane's gRPC port.",
				img:    rt,
				want: layout{
					OS: "linux", Architecture: arch, Created: "1970-01-01T00:00:00Z",
					Entrypoint: []string{"/function"}, User: "65532:65532", ExposedPorts: []string{"9443/tcp"},
					Files: []string{"function"},
				},
			},
			"Package": {
				reason: "The package is the runtime image plus package.yaml, and no examples layer: ours in example/ hold XRDs, not package examples.",
				img:    pkg,
				want: layout{
					OS: "linux", Architecture: arch, Created: "1970-01-01T00:00:00Z",
					Entrypoint: []string{"/function"}, User: "65532:65532", ExposedPorts: []string{"9443/tcp"},
					Files: []string{"function", "package.yaml"},
				},
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				if diff := cmp.Diff(tc.want, tc.img.layout()); diff != "" {
					t.Errorf("%s\nlayout: -want, +got:\n%s", tc.reason, diff)
				}
			})
		}
	})

	t.Run("BinaryFile", func(t *testing.T) {
		// Nothing of the build machine in the binary's tar header: that
		// would change the layer digest from one machine to the next.
		f := pkg.file(t, "function")
		got := header{Mode: f.hdr.Mode, UID: f.hdr.Uid, GID: f.hdr.Gid, ModTime: f.hdr.ModTime.Unix(), Uname: f.hdr.Uname}
		if diff := cmp.Diff(header{Mode: 0o755}, got); diff != "" {
			t.Errorf("/function's tar header: -want, +got:\n%s", diff)
		}
	})

	t.Run("PrintedConfigMatchesImage", func(t *testing.T) {
		// The Dockerfile is checked against --print-build-config, so that
		// must describe the image xpkg really builds.
		c := printedConfig(t, root)
		got := pkg.layout()
		want := layout{Entrypoint: c.Entrypoint, User: c.User, ExposedPorts: c.ExposedPorts}
		got = layout{Entrypoint: got.Entrypoint, User: got.User, ExposedPorts: got.ExposedPorts}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("--print-build-config's image config: -printed, +built:\n%s", diff)
		}
	})

	t.Run("Metadata", func(t *testing.T) {
		objs := packageObjects(t, pkg.file(t, "package.yaml").data)
		got := make([]objectID, 0, len(objs))
		for _, o := range objs {
			got = append(got, objectID{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Metadata.Name})
		}
		want := []objectID{
			{APIVersion: "meta.pkg.crossplane.io/v1", Kind: "Function", Name: "function-inference-gateway"},
			{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "inputs.inferencegateway.fn.crossplane.io"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("package.yaml's objects: -want, +got:\n%s", diff)
		}

		fn := objs[0]
		cases := map[string]struct {
			got  any
			want any
		}{
			"Capabilities":      {got: fn.Spec.Capabilities, want: []string{"composition"}},
			"CrossplaneVersion": {got: fn.Spec.Crossplane.Version, want: testedCrossplane},
			"Source":            {got: fn.Metadata.Annotations["meta.crossplane.io/source"], want: "github.com/modelplaneai/function-inference-gateway"},
			"License":           {got: fn.Metadata.Annotations["meta.crossplane.io/license"], want: "Apache-2.0"},
			"AnnotationsSet": {
				got: nonEmpty(fn.Metadata.Annotations),
				want: []string{
					"meta.crossplane.io/description", "meta.crossplane.io/license", "meta.crossplane.io/maintainer",
					"meta.crossplane.io/readme", "meta.crossplane.io/source",
				},
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				if diff := cmp.Diff(tc.want, tc.got); diff != "" {
					t.Errorf("the Function's %s: -want, +got:\n%s", name, diff)
				}
			})
		}
	})

	t.Run("Configuration", func(t *testing.T) {
		testConfiguration(t, root, xp, first.path(t, "configuration"))
	})

	t.Run("BinaryBuild", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "function")
		if err := os.WriteFile(bin, pkg.file(t, "function").data, 0o755); err != nil {
			t.Fatal(err)
		}
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("buildinfo.ReadFile(): %v", err)
		}
		got := map[string]string{}
		for _, s := range bi.Settings {
			switch {
			case slices.Contains([]string{"-trimpath", "CGO_ENABLED", "GOOS", "GOARCH"}, s.Key):
				got[s.Key] = s.Value
			case strings.HasPrefix(s.Key, "vcs"):
				// -buildvcs=false: present, these would differ between a
				// checkout and the Docker build, which sees no .git.
				got[s.Key] = s.Value
			}
		}
		want := map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the binary's build settings: -want, +got:\n%s", diff)
		}

		// -ldflags isn't in the build settings when -trimpath is, so look
		// for what -s -w and -buildid= leave out.
		ef, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("elf.Open(): %v", err)
		}
		defer func() { _ = ef.Close() }()
		var stripped []string
		for _, s := range ef.Sections {
			if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
				stripped = append(stripped, s.Name)
			}
		}
		if len(stripped) > 0 {
			t.Errorf("the binary has sections -s -w should have left out: %v", stripped)
		}
		id, err := exec.Command("go", "tool", "buildid", bin).Output()
		if err != nil {
			t.Fatalf("go tool buildid: %v", err)
		}
		if got := strings.TrimSpace(string(id)); got != "" {
			t.Errorf("the binary's build ID: want none (-buildid=), got %q", got)
		}
	})

	t.Run("BinaryRuns", func(t *testing.T) {
		if runtime.GOOS != "linux" || runtime.GOARCH != arch {
			t.Skipf("the image's binary is linux/%s; this is %s/%s", arch, runtime.GOOS, runtime.GOARCH)
		}
		bin := filepath.Join(t.TempDir(), "function")
		if err := os.WriteFile(bin, pkg.file(t, "function").data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("/function --help: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "--insecure") {
			t.Errorf("/function --help doesn't mention --insecure:\n%s", out)
		}
	})
}

func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	want := printedConfig(t, root)
	df := readDockerfile(t, filepath.Join(root, "Dockerfile"))

	buildStage := df.stage(t, "build")
	final := df.stages[len(df.stages)-1]
	gb := buildStage.goBuild(t)

	// Env is the build's environment: ENV lines, then the RUN's own.
	env := map[string]string{}
	for _, in := range buildStage.instructions {
		if in.cmd == "ENV" {
			k, v, _ := strings.Cut(in.args, "=")
			env[k] = unquote(v)
		}
	}
	for _, kv := range gb.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	wantEnv := map[string]string{"GOOS": "${TARGETOS}", "GOARCH": "${TARGETARCH}"}
	gotEnv := map[string]string{"GOOS": env["GOOS"], "GOARCH": env["GOARCH"]}
	for _, kv := range want.Env {
		k, v, _ := strings.Cut(kv, "=")
		wantEnv[k] = v
		gotEnv[k] = env[k]
	}

	var expose []string
	for _, in := range final.instructions {
		if in.cmd == "EXPOSE" {
			for p := range strings.FieldsSeq(in.args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				expose = append(expose, p)
			}
		}
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(final.last(t, "ENTRYPOINT")), &entrypoint); err != nil {
		t.Errorf("ENTRYPOINT isn't in exec (JSON) form: %v", err)
	}

	goMod := goDirective(t, filepath.Join(root, "go.mod"))
	golang := strings.TrimPrefix(buildStage.image(), "golang:")

	cases := map[string]struct {
		reason string
		got    any
		want   any
	}{
		"GoBuildFlags": {
			reason: "The Dockerfile's go build flags must be xpkg's, written the same way (-name=value).",
			got:    gb.flags, want: want.Flags,
		},
		"GoBuildPackage": {
			reason: "The Dockerfile must build the main package xpkg builds.",
			got:    gb.pkg, want: want.Package,
		},
		"GoBuildOutput": {
			reason: "The final stage copies the binary from /function.",
			got:    gb.output, want: "/function",
		},
		"GoBuildEnv": {
			reason: "The Dockerfile must set xpkg's build environment, and cross-compile for the target platform.",
			got:    gotEnv, want: wantEnv,
		},
		"GoVersion": {
			reason: "The golang image must be of the Go release go.mod asks for.",
			got:    strings.HasPrefix(goMod+".", golang+"."), want: true,
		},
		"CopyBinary": {
			reason: "The final stage holds the binary at the path xpkg puts it.",
			got:    final.last(t, "COPY"), want: "--from=build /function /function",
		},
		"Entrypoint": {
			reason: "The entrypoint must be xpkg's.",
			got:    entrypoint, want: want.Entrypoint,
		},
		"User": {
			reason: "The user must be xpkg's, as numbers so runAsNonRoot can check it.",
			got:    final.last(t, "USER"), want: want.User,
		},
		"Expose": {
			reason: "The exposed ports must be xpkg's.",
			got:    expose, want: want.ExposedPorts,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\n-xpkg, +Dockerfile:\n%s", tc.reason, diff)
			}
		})
	}

	t.Run("CopiesEverySource", func(t *testing.T) {
		// The build stage copies folders, not the whole context (which
		// holds bin/ and _output/). A new top-level folder the binary
		// needs would break the Docker build; catch that here instead.
		var copied []string
		for _, in := range buildStage.instructions {
			if in.cmd != "COPY" {
				continue
			}
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, strings.TrimSuffix(src, "/"))
			}
		}
		out, err := goCmd(root, "list", "-deps", "-f", "{{with .Module}}{{if .Main}}{{$.Dir}}{{end}}{{end}}", want.Package)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for dir := range strings.FieldsSeq(out) {
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				t.Fatal(err)
			}
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if !slices.Contains(copied, top) {
				missing = append(missing, filepath.ToSlash(rel))
			}
		}
		for _, f := range []string{"go.mod", "go.sum"} {
			if !slices.Contains(copied, f) {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			t.Errorf("the Dockerfile's build stage copies %v, which leaves out %v", copied, missing)
		}
	})
}

// repoRoot returns the repository root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goCmd runs go in dir and returns its stdout.
func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot run go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// A built artifact, from one line of xpkg's output.
type artifact struct {
	digest string
	path   string
}

// A build's artifacts, keyed by kind ("image" or "package") and platform.
type artifacts map[string]artifact

// build runs test/tools/xpkg for arch into out.
func build(t *testing.T, root, crossplane, out string) artifacts {
	t.Helper()
	stdout, err := goCmd(root, "-C", filepath.Join(root, "test", "tools"), "run", "./xpkg",
		"--arch", arch, "--output", out, "--crossplane", crossplane)
	if err != nil {
		t.Fatal(err)
	}
	a := artifacts{}
	s := bufio.NewScanner(strings.NewReader(stdout))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) != 4 {
			t.Fatalf("cannot read xpkg's output line %q: want kind, platform, digest and path", s.Text())
		}
		a[f[0]+" "+f[1]] = artifact{digest: f[2], path: f[3]}
	}
	return a
}

// digests returns each artifact's digest.
func (a artifacts) digests() map[string]string {
	d := make(map[string]string, len(a))
	for k, v := range a {
		d[k] = v.digest
	}
	return d
}

// fileHashes returns the SHA-256 of each artifact's file: the digests cover
// the image, but the file is what gets pushed and checked in.
func (a artifacts) fileHashes(t *testing.T) map[string]string {
	t.Helper()
	h := make(map[string]string, len(a))
	for k, v := range a {
		b, err := os.ReadFile(v.path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		h[k] = hex.EncodeToString(s[:])
	}
	return h
}

// path returns the file of the kind of artifact built for linux/arch, or
// of the Configuration, which has no platform.
func (a artifacts) path(t *testing.T, kind string) string {
	t.Helper()
	platform := "linux/" + arch
	if kind == "configuration" {
		platform = "any"
	}
	v, ok := a[kind+" "+platform]
	if !ok {
		t.Fatalf("xpkg printed no %s for linux/%s: %v", kind, arch, a)
	}
	return v.path
}

// image is what a Docker-format image tarball holds.
type image struct {
	config imageConfig
	// files are every layer's files by path. The images here have no
	// file in two layers, so none is lost.
	files map[string]file
}

// imageConfig is the part of an OCI image config the tests check.
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		Entrypoint   []string            `json:"Entrypoint"`
		User         string              `json:"User"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	} `json:"config"`
}

// file is a file in an image layer.
type file struct {
	hdr  *tar.Header
	data []byte
}

// layout is the part of an image the tests compare.
type layout struct {
	OS           string
	Architecture string
	Created      string
	Entrypoint   []string
	User         string
	ExposedPorts []string
	Files        []string
}

// header is the part of a tar header that must not come from the build
// machine.
type header struct {
	Mode     int64
	UID, GID int
	ModTime  int64
	Uname    string
}

func (i *image) layout() layout {
	l := layout{
		OS:           i.config.OS,
		Architecture: i.config.Architecture,
		Created:      i.config.Created,
		Entrypoint:   i.config.Config.Entrypoint,
		User:         i.config.Config.User,
	}
	for p := range i.config.Config.ExposedPorts {
		l.ExposedPorts = append(l.ExposedPorts, p)
	}
	slices.Sort(l.ExposedPorts)
	for name := range i.files {
		l.Files = append(l.Files, name)
	}
	slices.Sort(l.Files)
	return l
}

// file returns the image's file at path, which has no leading slash.
func (i *image) file(t *testing.T, path string) file {
	t.Helper()
	f, ok := i.files[path]
	if !ok {
		t.Fatalf("the image has no %s", path)
	}
	return f
}

// readImage reads a tarball as tarball.Write and docker save write it:
// manifest.json names the config and the layers, each a file of the tar.
func readImage(t *testing.T, path string) *image {
	t.Helper()
	blobs, err := untar(path)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(blobs["manifest.json"], &manifest); err != nil {
		t.Fatalf("cannot read %s's manifest.json: %v", path, err)
	}
	if len(manifest) != 1 {
		t.Fatalf("%s holds %d images, want 1", path, len(manifest))
	}
	img := &image{files: map[string]file{}}
	if err := json.Unmarshal(blobs[manifest[0].Config], &img.config); err != nil {
		t.Fatalf("cannot read %s's image config: %v", path, err)
	}
	for _, l := range manifest[0].Layers {
		if err := readLayer(blobs[l], img.files); err != nil {
			t.Fatalf("cannot read %s's layer %s: %v", path, l, err)
		}
	}
	return img
}

// untar returns every regular file of a tar by name.
func untar(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[hdr.Name] = b
	}
}

// readLayer adds a layer's regular files to files. Layers may be gzipped
// tars or plain ones.
func readLayer(b []byte, files map[string]file) error {
	var r io.Reader = bytes.NewReader(b)
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		defer func() { _ = zr.Close() }()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(hdr.Name, "/")] = file{hdr: hdr, data: data}
	}
}

// object is the part of a package.yaml object the tests check. The CRD's
// spec decodes into the Function's spec fields, which it doesn't have.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Capabilities []string `json:"capabilities"`
		Crossplane   struct {
			Version string `json:"version"`
		} `json:"crossplane"`
	} `json:"spec"`
}

// objectID names an object.
type objectID struct {
	APIVersion, Kind, Name string
}

// packageObjects decodes package.yaml's stream of objects.
func packageObjects(t *testing.T, b []byte) []object {
	t.Helper()
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []object
	for {
		var o object
		err := d.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("cannot decode package.yaml: %v", err)
		}
		if o.Kind == "" {
			continue // The stream's empty documents, between ---s.
		}
		objs = append(objs, o)
	}
}

// nonEmpty returns the sorted keys whose values aren't empty.
func nonEmpty(m map[string]string) []string {
	var keys []string
	for k, v := range m {
		if strings.TrimSpace(v) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// buildConfig is what xpkg --print-build-config prints.
type buildConfig struct {
	Env          []string `json:"env"`
	Flags        []string `json:"flags"`
	Package      string   `json:"package"`
	Entrypoint   []string `json:"entrypoint"`
	User         string   `json:"user"`
	ExposedPorts []string `json:"exposedPorts"`
}

var (
	printOnce sync.Once
	printed   buildConfig
	printErr  error
)

// printedConfig returns xpkg's --print-build-config, run once per test
// process.
func printedConfig(t *testing.T, root string) buildConfig {
	t.Helper()
	printOnce.Do(func() {
		var out string
		out, printErr = goCmd(root, "-C", filepath.Join(root, "test", "tools"), "run", "./xpkg", "--print-build-config")
		if printErr == nil {
			printErr = json.Unmarshal([]byte(out), &printed)
		}
	})
	if printErr != nil {
		t.Fatalf("cannot get xpkg's build config: %v", printErr)
	}
	return printed
}

// goDirective returns the go line's version in a go.mod.
func goDirective(t *testing.T, gomod string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go line", gomod)
	return ""
}

// dockerfile is a Dockerfile's stages.
type dockerfile struct {
	stages []stage
}

// stage is one FROM and the instructions after it.
type stage struct {
	from         string
	instructions []instruction
}

// instruction is one instruction, continuation lines joined.
type instruction struct {
	cmd  string
	args string
}

// readDockerfile splits a Dockerfile into stages of instructions. It knows
// what this repository's Dockerfile uses: comments, continuation lines and
// one instruction a line; not heredocs or a changed escape character.
func readDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	var cont strings.Builder
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		// Docker drops comment lines even inside a continued instruction.
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cont.WriteString(s + " ")
			continue
		}
		cont.WriteString(l)
		line := cont.String()
		cont.Reset()

		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			df.stages = append(df.stages, stage{from: in.args})
			continue
		}
		if len(df.stages) == 0 {
			t.Fatalf("%s has %s before its first FROM", path, in.cmd)
		}
		s := &df.stages[len(df.stages)-1]
		s.instructions = append(s.instructions, in)
	}
	if len(df.stages) == 0 {
		t.Fatalf("%s has no FROM", path)
	}
	return df
}

// stage returns the stage named name (FROM … AS name).
func (d dockerfile) stage(t *testing.T, name string) stage {
	t.Helper()
	for _, s := range d.stages {
		f := strings.Fields(s.from)
		if len(f) >= 2 && strings.EqualFold(f[len(f)-2], "AS") && f[len(f)-1] == name {
			return s
		}
	}
	t.Fatalf("the Dockerfile has no stage named %s", name)
	return stage{}
}

// image returns the stage's base image, without FROM's flags or AS.
func (s stage) image() string {
	for f := range strings.FieldsSeq(s.from) {
		if !strings.HasPrefix(f, "--") {
			return f
		}
	}
	return ""
}

// last returns the arguments of the stage's last cmd instruction: the one
// that counts for ENTRYPOINT and USER.
func (s stage) last(t *testing.T, cmd string) string {
	t.Helper()
	for _, in := range slices.Backward(s.instructions) {
		if in.cmd == cmd {
			return in.args
		}
	}
	t.Fatalf("the Dockerfile's stage %q has no %s", s.from, cmd)
	return ""
}

// goBuild is a RUN's go build command.
type goBuild struct {
	env    []string
	flags  []string
	output string
	pkg    string
}

// goBuild finds the stage's go build command and splits it into its
// environment, flags, output and package.
func (s stage) goBuild(t *testing.T) goBuild {
	t.Helper()
	for _, in := range s.instructions {
		if in.cmd != "RUN" {
			continue
		}
		words, err := shellWords(in.args)
		if err != nil {
			t.Fatalf("cannot split RUN %s: %v", in.args, err)
		}
		// RUN's own flags, such as --mount, come first.
		for len(words) > 0 && strings.HasPrefix(words[0], "--") {
			words = words[1:]
		}
		// One command of a && or ; list.
		for cmd := range splitList(words) {
			var gb goBuild
			for len(cmd) > 0 && isAssignment(cmd[0]) {
				gb.env = append(gb.env, cmd[0])
				cmd = cmd[1:]
			}
			if len(cmd) < 2 || cmd[0] != "go" || cmd[1] != "build" {
				continue
			}
			for i := 2; i < len(cmd); i++ {
				switch w := cmd[i]; {
				case w == "-o" && i+1 < len(cmd):
					gb.output = cmd[i+1]
					i++
				case strings.HasPrefix(w, "-"):
					gb.flags = append(gb.flags, w)
				default:
					gb.pkg = w
				}
			}
			return gb
		}
	}
	t.Fatalf("the Dockerfile's stage %q runs no go build", s.from)
	return goBuild{}
}

// splitList yields the commands of a shell list, split at && and ;.
func splitList(words []string) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		start := 0
		for i, w := range words {
			if w == "&&" || w == ";" {
				if !yield(words[start:i]) {
					return
				}
				start = i + 1
			}
		}
		yield(words[start:])
	}
}

// isAssignment reports whether w is a shell variable assignment, NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// shellWords splits s into words as a POSIX shell would for what a
// Dockerfile RUN line holds: quotes and backslashes, no expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped && quote == '"':
			// In double quotes a backslash escapes only these; before
			// anything else it stays.
			if !strings.ContainsRune("$`\"\\", r) {
				w.WriteRune('\\')
			}
			w.WriteRune(r)
			escaped = false
		case escaped:
			w.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				w.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("cannot split %q: unterminated quote or escape", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// unquote removes one pair of double quotes around an ENV value.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
