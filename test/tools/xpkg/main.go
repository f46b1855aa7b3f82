// Command xpkg builds function-inference-gateway's runtime image and its
// Crossplane package, and the Configuration package of the XRDs and
// Compositions that use it, without Docker, so the packages can be built on
// any machine that has Go.
//
// For each architecture it cross-compiles a static binary, wraps it in a
// one-layer OCI image written as a tarball with go-containerregistry, and
// hands that tarball to crossplane xpkg build. The Configuration, which has
// no runtime and no architecture, is built once from package/configuration.
// Nothing in the output depends
// on the clock, the user or the checkout's path, so two builds of the same
// source with the same Go toolchain give the same digests.
//
// Run it from the repository root:
//
//	go -C test/tools run ./xpkg
//
// Results go to stdout, one line per artifact:
//
//	image   linux/amd64 sha256:… /abs/path/_output/function-inference-gateway-runtime-amd64.tar
//	package linux/amd64 sha256:… /abs/path/_output/function-inference-gateway-amd64.xpkg
//	configuration any sha256:… /abs/path/_output/configuration-inference-gateway.xpkg
//
// Progress and timings go to stderr.
//
// The package digest is that of the image in the .xpkg file. crossplane xpkg
// push first copies the layer annotations the package keeps in its config
// onto the layers, so the manifest it pushes has another digest; that one
// is reproducible too.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// modulePath identifies the repository root: the folder whose go.mod
// declares it.
const modulePath = "github.com/modelplaneai/function-inference-gateway"

// pkgName is the package's name, the prefix of every file this writes.
const pkgName = "function-inference-gateway"

// configurationName is the Configuration package's name, the prefix of its
// file.
const configurationName = "configuration-inference-gateway"

// The package roots, relative to the repository root. The Configuration's
// sits inside the Function's, beside the Input CRD it shares the package/
// folder with, so the Function's build must leave its files out.
var (
	functionRoot      = "package"
	configurationRoot = filepath.Join("package", "configuration")
)

// mainPackage is the function's main package, relative to the root.
const mainPackage = "./cmd/function"

// goBuildEnv is the environment, beyond GOOS and GOARCH, of the function's
// go build. With cgo off the binary is static, so it runs on an image with
// no libc.
var goBuildEnv = []string{"CGO_ENABLED=0"}

// goBuildFlags are the function's go build flags. The Dockerfile must use
// the same ones; test/xpkg checks it does, via --print-build-config.
//
// -trimpath drops the checkout's path from the binary. -s -w drop the
// symbol table and DWARF data, which only add size; -buildid= drops the Go
// build ID, which serves the build cache, not the running binary.
// -buildvcs=false keeps the VCS stamp out: it depends on whether .git is
// present and whether the tree is dirty, which would make a Docker build
// (which sees no .git) and a build from a checkout differ.
var goBuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}

// The runtime image's layout. The user is distroless's nonroot, as numbers
// so the image needs no /etc/passwd and runAsNonRoot can check it.
// Crossplane's default Deployment runs the function as 2000 anyway; this
// user counts when a DeploymentRuntimeConfig replaces that security
// context. Crossplane's function runtime serves gRPC on 9443.
const (
	entrypoint  = "/function"
	runAsUser   = "65532:65532"
	exposedPort = "9443/tcp"
	sourceURL   = "https://" + modulePath
)

// epoch is the time stamped on the layer's file and the image config. A
// fixed time keeps the digests reproducible; the Unix epoch rather than
// Go's zero time because tar's ustar format can't hold years before 1970.
var epoch = time.Unix(0, 0).UTC()

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "xpkg:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	root       string
	output     string
	archs      []string
	crossplane string
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("xpkg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// go -C test/tools changes the working directory before we start, so a
	// relative --output or --crossplane, typed at the repository root, is
	// taken from the root rather than from test/tools.
	root := fs.String("root", "", "The repository root. Found from the working directory when empty.")
	output := fs.String("output", "", "The folder to write into, relative to the root. <root>/_output when empty.")
	arch := fs.String("arch", "amd64,arm64", "Comma-separated GOARCHes to build for; each gets its own package.")
	xp := fs.String("crossplane", "", "The crossplane CLI: a path relative to the root, or a name looked up in PATH. <root>/bin/crossplane-<version> when empty, built from test/tools if missing.")
	printConfig := fs.Bool("print-build-config", false, "Print the go build environment and flags and the image config as JSON, and exit.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cannot take arguments, got %q", fs.Args())
	}

	if *printConfig {
		return printBuildConfig(stdout)
	}

	o := options{root: *root, output: *output, crossplane: *xp}
	for a := range strings.SplitSeq(*arch, ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.archs = append(o.archs, a)
		}
	}
	if len(o.archs) == 0 {
		return errors.New("cannot build for no architecture: set --arch")
	}

	var err error
	if o.root == "" {
		if o.root, err = findRoot(); err != nil {
			return err
		}
	}
	if o.root, err = filepath.Abs(o.root); err != nil {
		return fmt.Errorf("cannot make the root absolute: %w", err)
	}
	if o.output == "" {
		o.output = "_output"
	}
	o.output = fromRoot(o.root, o.output)
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		return fmt.Errorf("cannot create the output folder: %w", err)
	}
	if o.crossplane == "" {
		if o.crossplane, err = crossplaneCLI(o.root, stderr); err != nil {
			return err
		}
	}
	if strings.ContainsRune(o.crossplane, filepath.Separator) {
		// A bare name, like a shell's, is looked up in PATH.
		o.crossplane = fromRoot(o.root, o.crossplane)
	}

	ignore, err := configurationFiles(o.root)
	if err != nil {
		return err
	}
	for _, a := range o.archs {
		if err := buildArch(o, a, ignore, stdout, stderr); err != nil {
			return err
		}
	}
	return buildConfiguration(o, stdout, stderr)
}

// configurationFiles returns the Configuration's YAML files relative to the
// Function's package root, for the Function build's --ignore: it takes
// file globs, not folders (crossplane v2.2.0 cmd/crank/xpkg/build.go,
// buildFilters, with crossplane-runtime's parser.SkipPath matching each
// path by filepath.Match). Listing the files rather than a glob per depth
// keeps a deeper folder from slipping into the Function package, which
// would refuse a second package meta and the XRDs.
func configurationFiles(root string) ([]string, error) {
	var files []string
	base := filepath.Join(root, functionRoot)
	err := filepath.WalkDir(filepath.Join(root, configurationRoot), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(base, path)
		if err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the Configuration's files: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("cannot find the Configuration in %s", filepath.Join(root, configurationRoot))
	}
	return files, nil
}

// buildConfiguration builds the Configuration package: the XRDs and
// Compositions, and its dependencies on the Function and
// provider-kubernetes.
func buildConfiguration(o options, stdout, stderr io.Writer) error {
	start := time.Now()
	pkg := filepath.Join(o.output, configurationName+".xpkg")
	root := filepath.Join(o.root, configurationRoot)
	cmd := exec.Command(o.crossplane, "xpkg", "build",
		"--package-root="+root,
		// No examples layer: the example XRs in example/ come with
		// scenario files that are not examples of use.
		"--examples-root="+filepath.Join(root, "examples"),
		"--package-file="+pkg)
	cmd.Dir = o.root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot build the Configuration package: %w\n%s", err, b)
	}
	img, err := tarball.ImageFromPath(pkg, nil)
	if err != nil {
		return fmt.Errorf("cannot read the Configuration package back: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("cannot compute the Configuration package digest: %w", err)
	}
	fmt.Fprintf(stderr, "xpkg: built the Configuration package in %s\n", since(start))
	fmt.Fprintf(stdout, "configuration any %s %s\n", digest, pkg)
	return nil
}

// fromRoot returns path, taken from root if it's relative.
func fromRoot(root, path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(root, path)
}

// buildConfig is what --print-build-config prints: what a Dockerfile
// needs to build the same binary and an image configured the same way.
type buildConfig struct {
	// Env is the go build environment beyond GOOS and GOARCH.
	Env []string `json:"env"`
	// Flags are the go build flags, one argument each.
	Flags []string `json:"flags"`
	// Package is the main package, relative to the root.
	Package string `json:"package"`
	// Entrypoint is the image's entrypoint.
	Entrypoint []string `json:"entrypoint"`
	// User is the image's user, as uid:gid.
	User string `json:"user"`
	// ExposedPorts are the image's exposed ports, as port/protocol.
	ExposedPorts []string `json:"exposedPorts"`
}

func printBuildConfig(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	c := buildConfig{
		Env:          goBuildEnv,
		Flags:        goBuildFlags,
		Package:      mainPackage,
		Entrypoint:   []string{entrypoint},
		User:         runAsUser,
		ExposedPorts: []string{exposedPort},
	}
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("cannot print the build config: %w", err)
	}
	return nil
}

// findRoot walks up from the working directory to the folder whose go.mod
// declares the function's module. go -C test/tools run starts us two
// folders below it.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot get the working directory: %w", err)
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the repository root: no go.mod declaring %s above the working directory; set --root", modulePath)
		}
		dir = parent
	}
}

// modulePathOf returns the module path a go.mod declares, or "" if the file
// is missing or declares none.
func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	return ""
}

// crossplaneCLI returns <root>/bin/crossplane-<version>, the same file
// test/internal/toolchain uses, building it from the tools module if it's
// missing. The version comes from test/tools/go.mod so the two never drift.
func crossplaneCLI(root string, stderr io.Writer) (string, error) {
	tools := filepath.Join(root, "test", "tools")
	const mod = "github.com/crossplane/crossplane/v2"
	out, err := goOutput(tools, nil, "list", "-m", "-f", "{{.Version}}", mod)
	if err != nil {
		return "", fmt.Errorf("cannot find the pinned crossplane version: %w", err)
	}
	version := strings.TrimSpace(out)
	path := filepath.Join(root, "bin", "crossplane-"+version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	fmt.Fprintf(stderr, "xpkg: building the crossplane CLI %s into %s (minutes when cold)\n", version, path)
	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", filepath.Dir(path), err)
	}
	// Build to a temporary name and rename, so a test that looks for the
	// same file at the same time never runs half of one.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".build-*")
	if err != nil {
		return "", fmt.Errorf("cannot create a temporary file for the crossplane CLI: %w", err)
	}
	_ = tmp.Close()
	if _, err := goOutput(tools, nil, "build", "-o", tmp.Name(),
		"-ldflags", "-X "+mod+"/internal/version.version="+version,
		mod+"/cmd/crank"); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("cannot build the crossplane CLI: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("cannot move the crossplane CLI into place: %w", err)
	}
	fmt.Fprintf(stderr, "xpkg: built the crossplane CLI in %s\n", since(start))
	return path, nil
}

// buildArch builds the binary, runtime image and package for one GOARCH,
// leaving the files in ignore, relative to the package root, out of the
// package.
func buildArch(o options, arch string, ignore []string, stdout, stderr io.Writer) error {
	platform := "linux/" + arch

	start := time.Now()
	bin := filepath.Join(o.output, "bin", "linux_"+arch, "function")
	args := append([]string{"build"}, goBuildFlags...)
	args = append(args, "-o", bin, mainPackage)
	env := append([]string{"GOOS=linux", "GOARCH=" + arch}, goBuildEnv...)
	if _, err := goOutput(o.root, env, args...); err != nil {
		return fmt.Errorf("cannot build the %s binary: %w", platform, err)
	}
	fmt.Fprintf(stderr, "xpkg: built the %s binary in %s\n", platform, since(start))

	start = time.Now()
	img, err := runtimeImage(bin, arch)
	if err != nil {
		return fmt.Errorf("cannot assemble the %s runtime image: %w", platform, err)
	}
	tag, err := name.NewTag(pkgName + ":runtime-" + arch)
	if err != nil {
		return fmt.Errorf("cannot name the %s runtime image: %w", platform, err)
	}
	imgTar := filepath.Join(o.output, pkgName+"-runtime-"+arch+".tar")
	if err := tarball.WriteToFile(imgTar, tag, img); err != nil {
		return fmt.Errorf("cannot write the %s runtime image tarball: %w", platform, err)
	}
	imgDigest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("cannot compute the %s runtime image digest: %w", platform, err)
	}
	fmt.Fprintf(stderr, "xpkg: wrote the %s runtime image in %s\n", platform, since(start))

	start = time.Now()
	pkg := filepath.Join(o.output, pkgName+"-"+arch+".xpkg")
	cmd := exec.Command(o.crossplane, "xpkg", "build",
		"--package-root="+filepath.Join(o.root, functionRoot),
		"--ignore="+strings.Join(ignore, ","),
		// Examples would go into the package too, and the build picks up
		// ./examples by default. Ours live in example/ and hold XRDs and
		// Compositions for a whole control plane, not package examples, so
		// point it at a folder that doesn't exist: no examples layer. Files
		// put in package/examples would become the package's examples.
		"--examples-root="+filepath.Join(o.root, "package", "examples"),
		"--embed-runtime-image-tarball="+imgTar,
		"--package-file="+pkg)
	cmd.Dir = o.root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot build the %s package: %w\n%s", platform, err, b)
	}
	pkgImg, err := tarball.ImageFromPath(pkg, nil)
	if err != nil {
		return fmt.Errorf("cannot read the %s package back: %w", platform, err)
	}
	pkgDigest, err := pkgImg.Digest()
	if err != nil {
		return fmt.Errorf("cannot compute the %s package digest: %w", platform, err)
	}
	fmt.Fprintf(stderr, "xpkg: built the %s package in %s\n", platform, since(start))

	fmt.Fprintf(stdout, "image   %s %s %s\n", platform, imgDigest, imgTar)
	fmt.Fprintf(stdout, "package %s %s %s\n", platform, pkgDigest, pkg)
	return nil
}

// runtimeImage returns an image holding only the binary at /function. It
// starts from empty.Image rather than a base such as distroless: the binary
// is static and serves gRPC with certificates Crossplane mounts, so it needs
// no libc, CA bundle or passwd file, and no base image has to be fetched.
func runtimeImage(bin, arch string) (v1.Image, error) {
	layer, err := binaryLayer(bin)
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint:   []string{entrypoint},
			User:         runAsUser,
			ExposedPorts: map[string]struct{}{exposedPort: {}},
			Labels: map[string]string{
				"org.opencontainers.image.source":   sourceURL,
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	// The config goes first: appending the layer then adds its diff ID and
	// history entry to this config, rather than to one we'd overwrite.
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot set the image config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: shellJoin(slices.Concat(goBuildEnv, []string{"GOOS=linux", "GOARCH=" + arch, "go", "build"}, goBuildFlags, []string{mainPackage})),
			Comment:   "built by test/tools/xpkg",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot add the binary layer: %w", err)
	}
	return img, nil
}

// binaryLayer returns a layer holding bin at /function, owned by root and
// executable by anyone (the image runs as 65532). Its header carries
// nothing from the build machine: not the file's mtime, owner or mode.
func binaryLayer(bin string) (v1.Layer, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("cannot read the binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(entrypoint, "/"),
		Mode:     0o755,
		Size:     int64(len(b)),
		ModTime:  epoch,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("cannot write the layer's tar header: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return nil, fmt.Errorf("cannot write the binary into the layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("cannot finish the layer's tar: %w", err)
	}
	// go-containerregistry gzips the layer with no timestamp in the gzip
	// header. It reads the layer once for the digest and again to write it;
	// caching the gzipped bytes saves compressing the binary twice.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("cannot make a layer of the binary: %w", err)
	}
	return layer, nil
}

// goOutput runs go with args in dir, with env added to ours, and returns
// its stdout. Its stderr is in the error.
func goOutput(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cannot run %s in %s: %w\n%s", shellJoin(append([]string{"go"}, args...)), dir, err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// shellJoin joins args into a line a shell would split back into them, for
// messages people may paste into one. Only what our own args hold needs
// quoting: spaces.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \t") {
			q[i] = "'" + a + "'"
		}
	}
	return strings.Join(q, " ")
}

// since is the time since start, rounded for people.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(10 * time.Millisecond)
}
