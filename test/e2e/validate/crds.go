package validate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// Source is a set of upstream CRD files inside one version of a Go module.
// The files are read from the module cache, so the repository never holds a
// copy that could drift from the version the function is built against.
type Source struct {
	// Module is the Go module path.
	Module string
	// Version is the exact module version.
	Version string
	// Glob selects the CRD files, relative to the module root.
	Glob string
}

// Sources are the upstream CRDs the composed output is validated against:
// the versions of the APIs the function's go.mod builds against, and the
// provider-kubernetes release whose Object wraps every manifest.
var Sources = []Source{
	{Module: "github.com/envoyproxy/ai-gateway", Version: "v1.0.0", Glob: "manifests/charts/ai-gateway-crds-helm/templates/*.yaml"},
	// Envoy Gateway's chart also bundles the Gateway API CRDs (of the same
	// v1.5.1) in templates/*-gatewayapi-crds.yaml; only generated/ is read
	// here so that the Gateway API CRDs come from one place, the module below.
	{Module: "github.com/envoyproxy/gateway", Version: "v1.8.3", Glob: "charts/gateway-crds-helm/templates/generated/*.yaml"},
	// The standard channel: every Gateway API field the function writes,
	// Gateway spec.infrastructure included, is standard. The experimental
	// channel would accept fields a standard install rejects.
	{Module: "sigs.k8s.io/gateway-api", Version: "v1.5.1", Glob: "config/crd/standard/*.yaml"},
	{Module: "github.com/crossplane-contrib/provider-kubernetes", Version: "v1.3.1", Glob: "package/crds/*.yaml"},
	// The gateway's client certificate and its CA Issuer. Only
	// cert-manager.io: the acme.cert-manager.io kinds are never composed.
	{Module: "github.com/cert-manager/cert-manager", Version: "v1.21.2", Glob: "deploy/crds/cert-manager.io_*.yaml"},
}

// files returns the CRD files of the sources in the module cache. dir is
// where go mod download runs (see toolchain.ModuleDirs): the repository
// root.
func files(ctx context.Context, dir string, sources ...Source) ([]string, error) {
	mods := make([]string, 0, len(sources))
	for _, s := range sources {
		mods = append(mods, s.Module+"@"+s.Version)
	}
	dirs, err := toolchain.ModuleDirs(ctx, dir, mods...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range sources {
		matches, err := filepath.Glob(filepath.Join(dirs[s.Module+"@"+s.Version], s.Glob))
		if err != nil {
			return nil, fmt.Errorf("cannot list %s in %s@%s: %w", s.Glob, s.Module, s.Version, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("cannot find any file matching %s in %s@%s", s.Glob, s.Module, s.Version)
		}
		out = append(out, matches...)
	}
	return out, nil
}

// ReadSources reads and parses every CRD of the sources from the module
// cache. dir is where go mod download runs: the repository root. Load is
// faster when only some of the CRDs are needed.
func ReadSources(ctx context.Context, dir string, sources ...Source) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := files(ctx, dir, sources...)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range paths {
		c, err := ReadFile(f)
		if err != nil {
			return nil, err
		}
		crds = append(crds, c...)
	}
	return crds, nil
}

// Load returns a Validator for the CRDs of the sources in the module cache.
// dir is where go mod download runs: the repository root.
//
// Parsing YAML is what loading CRDs costs: a quarter of a second or more
// for EnvoyProxy's 1.3 MB alone, several seconds for all of them. So Load
// only reads each file and finds the group and kind of each CRD in it with
// a line scan of controller-gen's fixed layout, and the Validator parses a
// file the first time it meets one of its kinds. A file whose layout the
// scan does not recognise is parsed at once instead; a file whose parse
// disagrees with its scan is an error when it is parsed.
func Load(ctx context.Context, dir string, sources ...Source) (*Validator, error) {
	paths, err := files(ctx, dir, sources...)
	if err != nil {
		return nil, err
	}
	v, err := New(nil)
	if err != nil {
		return nil, err
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("cannot read CRDs: %w", err)
		}
		b, err = stripHelmGuards(b)
		if err != nil {
			return nil, fmt.Errorf("cannot read CRDs from %s: %w", path, err)
		}
		gks, ok := scan(b)
		if !ok {
			crds, err := parse(path, b)
			if err != nil {
				return nil, err
			}
			if err := v.add(crds...); err != nil {
				return nil, err
			}
			continue
		}
		f := &crdFile{path: path, data: b, kinds: gks}
		for _, gk := range gks {
			if prev, ok := v.files[gk]; ok {
				return nil, fmt.Errorf("cannot use %s: it defines %s, which %s defines already", path, gk, prev.path)
			}
			v.files[gk] = f
		}
	}
	return v, nil
}

// crdFile is a CRD file indexed by Load and not parsed yet.
type crdFile struct {
	path  string
	data  []byte
	kinds []schema.GroupKind // as scanned

	parsed bool
	err    error
}

// parse parses f and adds its CRDs to v, once. The caller holds v.mu.
func (v *Validator) parse(f *crdFile) error {
	if f.parsed {
		return f.err
	}
	f.parsed = true
	crds, err := parse(f.path, f.data)
	if err != nil {
		f.err = err
		return err
	}
	got := make([]schema.GroupKind, 0, len(crds))
	for _, c := range crds {
		got = append(got, schema.GroupKind{Group: c.Spec.Group, Kind: c.Spec.Names.Kind})
	}
	if !slices.Equal(got, f.kinds) {
		f.err = fmt.Errorf("cannot use %s: scanned it as defining %v, but it defines %v", f.path, f.kinds, got)
		return f.err
	}
	f.err = v.add(crds...)
	f.data = nil
	return f.err
}

// scan finds the group and kind of each CRD in a file of YAML documents
// laid out as controller-gen writes them: `kind: CustomResourceDefinition`
// at the top level, `group:` under spec and `kind:` under spec.names, each
// alone on its line, before the schemas. It reports false when a CRD
// document does not look like that. It reads each document only up to its
// kind, so indexing every upstream file costs milliseconds.
func scan(b []byte) ([]schema.GroupKind, bool) {
	var out []schema.GroupKind
	sep := []byte("\n---")
	for rest := b; len(rest) > 0; {
		doc := rest
		if i := bytes.Index(rest, sep); i >= 0 {
			doc, rest = rest[:i+1], rest[i+len(sep):]
		} else {
			rest = nil
		}
		if !bytes.HasPrefix(doc, []byte("kind: CustomResourceDefinition\n")) && !bytes.Contains(doc, []byte("\nkind: CustomResourceDefinition\n")) {
			continue
		}
		gk, ok := scanCRD(doc)
		if !ok {
			return nil, false
		}
		out = append(out, gk)
	}
	return out, true
}

// scanCRD finds spec.group and spec.names.kind in one CRD document.
func scanCRD(doc []byte) (schema.GroupKind, bool) {
	var sc crdScanner
	for len(doc) > 0 && (sc.gk.Group == "" || sc.gk.Kind == "") {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		sc.line(string(line))
	}
	return sc.gk, sc.gk.Group != "" && sc.gk.Kind != ""
}

// crdScanner follows a CRD document line by line, as far as spec.group and
// spec.names.kind.
type crdScanner struct {
	gk              schema.GroupKind
	inSpec, inNames bool
}

func (sc *crdScanner) line(l string) {
	switch {
	case l == "spec:":
		sc.inSpec = true
	case sc.inSpec && !strings.HasPrefix(l, " ") && l != "":
		sc.inSpec, sc.inNames = false, false
	case sc.inSpec && strings.HasPrefix(l, "  group: "):
		sc.gk.Group = unquote(strings.TrimPrefix(l, "  group: "))
	case sc.inSpec && l == "  names:":
		sc.inNames = true
	case sc.inNames && strings.HasPrefix(l, "    kind: "):
		sc.gk.Kind = unquote(strings.TrimPrefix(l, "    kind: "))
		sc.inNames = false
	case sc.inNames && !strings.HasPrefix(l, "    "):
		sc.inNames = false
	}
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// ReadFile reads the CRDs in one YAML file, skipping documents of any other
// kind (Gateway API ships a ValidatingAdmissionPolicy among its CRDs).
func ReadFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read CRDs: %w", err)
	}
	b, err = stripHelmGuards(b)
	if err != nil {
		return nil, fmt.Errorf("cannot read CRDs from %s: %w", path, err)
	}
	return parse(path, b)
}

// parse decodes the CRDs in b, the contents of path with Helm guards
// stripped.
func parse(path string, b []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot split %s into YAML documents: %w", path, err)
		}
		var tm struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("cannot read a document of %s: %w", path, err)
		}
		if tm.APIVersion != "apiextensions.k8s.io/v1" || tm.Kind != "CustomResourceDefinition" {
			continue // a comment-only document, or not a CRD
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("cannot decode a CRD of %s: %w", path, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// stripHelmGuards drops lines that hold nothing but a Helm template action.
// Envoy Gateway's CRD chart wraps each generated file in
// `{{- if .Values.crds.envoyGateway.enabled }}` ... `{{- end }}`; the CRD
// between the guards is plain YAML, and is read as if the guard were true.
// Templating anywhere else would change the CRD itself, so it is an error
// rather than something to guess at.
func stripHelmGuards(b []byte) ([]byte, error) {
	open := []byte("{{")
	if !bytes.Contains(b, open) {
		return b, nil
	}
	var out bytes.Buffer
	for {
		i := bytes.Index(b, open)
		if i < 0 {
			out.Write(b)
			return out.Bytes(), nil
		}
		start := bytes.LastIndexByte(b[:i], '\n') + 1
		end := len(b)
		if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
			end = i + j + 1
		}
		line := bytes.TrimSpace(b[start:end])
		if !bytes.HasPrefix(line, open) || !bytes.HasSuffix(line, []byte("}}")) || bytes.Count(line, open) != 1 {
			return nil, fmt.Errorf("cannot use %q: Helm templating inside a document is not supported", line)
		}
		out.Write(b[:start])
		b = b[end:]
	}
}
